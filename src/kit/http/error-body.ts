/** The body every error of a service is sent in; each spec fixes its own shape (e.g. statusEnvelope in status-envelope.ts). */
export type ErrorBody = (status: number, message: string) => Record<string, unknown>;
