import { STATUS_CODES } from 'node:http';
import { type TSchema, Type } from '@sinclair/typebox';

// `{status, response, message[, data]}`: the envelope of every answer of the accounts and
// shortener specs, errors and successes alike; `response` is the status's reason phrase.

const reason = (status: number) => STATUS_CODES[status] ?? 'Error';

/** An error answer (the accounts' and shortener's ErrorBody). */
export function statusEnvelope(status: number, message: string): { status: number; response: string; message: string } {
  return { status, response: reason(status), message };
}

/** A successful answer carrying `data`. */
export function dataEnvelope<T>(status: number, message: string, data: T): { status: number; response: string; message: string; data: T } {
  return { status, response: reason(status), message, data };
}

/** The schema of an error answer. */
export const ErrorEnvelope = Type.Object({
  status: Type.Integer(),
  response: Type.String(),
  message: Type.String(),
});

/** The schema of a successful answer whose `data` is `data`. */
export function envelope<T extends TSchema>(data: T) {
  return Type.Object({
    status: Type.Integer(),
    response: Type.String(),
    message: Type.String(),
    data,
  });
}
