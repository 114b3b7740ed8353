import type { FastifyReply, FastifyRequest } from 'fastify';
import { unexpectedErrorOutcome } from '../../kit/http/classify-error.js';

// GoTrue's error catalog: stable snake_case codes, each with its HTTP status. supabase-js surfaces
// `error.code` only when the response echoes `X-Supabase-Api-Version`, so the envelope depends on
// whether the request sent that header (see sendAuthError).

export class AuthError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra body fields, e.g. `weak_password: { reasons }`. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'AuthError';
  }
}

/** A 429; GoTrue sends no Retry-After, this idp does, so clients know when to come back. */
export class TooManyRequestsError extends AuthError {
  constructor(
    code: 'over_request_rate_limit' | 'over_email_send_rate_limit',
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(429, code, message);
    this.name = 'TooManyRequestsError';
  }
}

/** A 503 while the server is saturated; Retry-After tells the client when to come back. */
export class OverloadedError extends AuthError {
  constructor(readonly retryAfterSeconds: number) {
    super(503, 'request_timeout', 'Processing this request timed out, please retry after a moment');
    this.name = 'OverloadedError';
  }
}

/** OAuth-style errors (`{error, error_description}`), used by the token endpoint for a missing refresh token. */
export class OAuthError extends Error {
  constructor(
    readonly error: string,
    readonly description: string,
  ) {
    super(description);
    this.name = 'OAuthError';
  }
}

const API_VERSION_HEADER = 'x-supabase-api-version';
export const API_VERSION = '2024-01-01';

/** The version the client asked for, when it is a date on or after the first versioned API. */
function requestedApiVersion(request: FastifyRequest): string | null {
  const raw = request.headers[API_VERSION_HEADER];
  if (typeof raw !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(raw)) return null;
  return raw >= API_VERSION ? API_VERSION : null;
}

export function sendAuthError(request: FastifyRequest, reply: FastifyReply, err: AuthError | OAuthError): FastifyReply {
  if (err instanceof OAuthError) {
    return reply.code(400).send({ error: err.error, error_description: err.description });
  }
  reply.code(err.status).header('x-sb-error-code', err.code);
  if (err instanceof TooManyRequestsError || err instanceof OverloadedError) reply.header('retry-after', String(err.retryAfterSeconds));
  else if (err.status === 503) reply.header('retry-after', '1');
  if (requestedApiVersion(request) !== null) {
    return reply.header('X-Supabase-Api-Version', API_VERSION).send({ code: err.code, message: err.message, ...err.extra });
  }
  // Clients that predate the versioned API read `error_code` and `msg`.
  return reply.send({ code: err.status, error_code: err.code, msg: err.message, ...err.extra });
}

/**
 * An error that is not one of the catalog's, in GoTrue's terms. The kit's
 * classification decides the status, as for every service; the cause of a 5xx
 * goes to the log, never to the client.
 */
export function unexpectedAuthError(request: FastifyRequest, err: Error): AuthError {
  const outcome = unexpectedErrorOutcome(err, request.log);
  switch (outcome.kind) {
    case 'client-gone':
      return new AuthError(outcome.status, 'validation_failed', 'Request not complete');
    case 'client-error':
      return new AuthError(outcome.status, 'validation_failed', outcome.message);
    case 'unavailable':
      return new AuthError(503, 'unexpected_failure', 'Service temporarily unavailable');
    case 'internal':
      return authErrors.unexpected();
  }
}

/** JSON's name for a value's type, as Go's decoder words it. */
function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'boolean') return 'bool';
  return typeof value; // number, string, object
}

/** Go's name for the type a field was declared with (GoTrue decodes into Go structs). */
const GO_TYPES: Record<string, string> = {
  string: 'string',
  boolean: 'bool',
  object: 'map[string]interface {}',
  integer: 'int',
  number: 'float64',
};

/**
 * A body field of the wrong JSON type, worded as GoTrue's decoder reports it (bad_json: "json:
 * cannot unmarshal number into Go struct field SignupParams.email of type string"), so that the
 * message names the field and the type it must have. `params` is GoTrue's name for the body of
 * the route; `validation` is the schema check's first finding.
 */
export function bodyTypeError(
  params: string,
  body: unknown,
  validation: { instancePath: string; keyword: string; params: Record<string, unknown>; message?: string },
): AuthError {
  const path = validation.instancePath.split('/').slice(1);
  if (validation.keyword !== 'type')
    return authErrors.badJson(`body${validation.instancePath.replaceAll('/', '.')} ${validation.message ?? 'is not valid'}`);
  let value = body;
  for (const key of path) value = (value as Record<string, unknown> | null)?.[key];
  const expected = GO_TYPES[String(validation.params.type)] ?? String(validation.params.type);
  const target = path.length === 0 ? `Go value of type api.${params}` : `Go struct field ${params}.${path.join('.')} of type ${expected}`;
  return authErrors.badJson(`json: cannot unmarshal ${jsonTypeOf(value)} into ${target}`);
}

// The catalog, named after GoTrue's codes so the route code reads like the reference.
export const authErrors = {
  badJson: (detail: string) => new AuthError(400, 'bad_json', `Could not parse request body as JSON: ${detail}`),
  validation: (message: string, status = 400) => new AuthError(status, 'validation_failed', message),
  signupDisabled: () => new AuthError(422, 'signup_disabled', 'Signups not allowed for this instance'),
  anonymousDisabled: () => new AuthError(422, 'anonymous_provider_disabled', 'Anonymous sign-ins are disabled'),
  phoneUnsupported: () => new AuthError(400, 'phone_provider_disabled', 'Unsupported phone provider'),
  phoneDisabled: () => new AuthError(400, 'phone_provider_disabled', 'Phone signups are disabled'),
  weakPassword: (message: string, reasons: string[]) => new AuthError(422, 'weak_password', message, { weak_password: { reasons } }),
  userAlreadyExists: () => new AuthError(422, 'user_already_exists', 'User already registered'),
  emailExists: () => new AuthError(422, 'email_exists', 'A user with this email address has already been registered'),
  invalidCredentials: () => new AuthError(400, 'invalid_credentials', 'Invalid login credentials'),
  emailNotConfirmed: () => new AuthError(400, 'email_not_confirmed', 'Email not confirmed'),
  userBanned: (status = 400) => new AuthError(status, 'user_banned', 'User is banned'),
  unsupportedGrantType: () => new AuthError(400, 'invalid_credentials', 'unsupported_grant_type'),
  refreshTokenNotFound: () => new AuthError(400, 'refresh_token_not_found', 'Invalid Refresh Token: Refresh Token Not Found'),
  refreshTokenAlreadyUsed: () => new AuthError(400, 'refresh_token_already_used', 'Invalid Refresh Token: Already Used'),
  noAuthorization: () => new AuthError(401, 'no_authorization', 'This endpoint requires a valid Bearer token'),
  badJwt: (message: string, status = 403) => new AuthError(status, 'bad_jwt', message),
  userFromSubNotFound: () => new AuthError(403, 'user_not_found', 'User from sub claim in JWT does not exist'),
  sessionNotFound: () => new AuthError(403, 'session_not_found', 'Session from session_id claim in JWT does not exist'),
  notAdmin: () => new AuthError(403, 'not_admin', 'User not allowed'),
  userNotFound: () => new AuthError(404, 'user_not_found', 'User not found'),
  // GoTrue's own texts for its per-address and email-sending limits.
  overRequestRateLimit: (retryAfterSeconds: number) =>
    new TooManyRequestsError('over_request_rate_limit', 'Request rate limit reached', retryAfterSeconds),
  overEmailSendRateLimit: (retryAfterSeconds: number) =>
    new TooManyRequestsError('over_email_send_rate_limit', 'email rate limit exceeded', retryAfterSeconds),
  /** GoTrue's answer to a second mail to one address within SMTP_MAX_FREQUENCY. */
  overEmailSendFrequency: (retryAfterSeconds: number) =>
    new TooManyRequestsError(
      'over_email_send_rate_limit',
      `For security purposes, you can only request this after ${retryAfterSeconds} seconds.`,
      retryAfterSeconds,
    ),
  otpExpired: (message: 'Email link is invalid or has expired' | 'Token has expired or is invalid') =>
    new AuthError(403, 'otp_expired', message),
  /** This idp's own per-account limit, under GoTrue's rate-limit code so clients handle it alike. */
  tooManyFailedSignIns: (retryAfterSeconds: number) =>
    new TooManyRequestsError(
      'over_request_rate_limit',
      'Too many failed sign-in attempts for this account, try again later',
      retryAfterSeconds,
    ),
  // Multi-factor authentication (GoTrue's api/mfa.go texts).
  anonymousNotAllowed: () => new AuthError(403, 'no_authorization', 'Anonymous user not allowed to perform these actions'),
  factorIdNotUuid: () => new AuthError(404, 'validation_failed', 'factor_id must be an UUID'),
  factorNotFound: () => new AuthError(404, 'mfa_factor_not_found', 'Factor not found'),
  challengeNotFound: () => new AuthError(422, 'mfa_factor_not_found', 'MFA factor with the provided challenge ID not found'),
  challengeIpMismatch: () => new AuthError(422, 'mfa_ip_address_mismatch', 'Challenge and verify IP addresses mismatch.'),
  challengeExpired: (id: string) =>
    new AuthError(
      422,
      'mfa_challenge_expired',
      `MFA challenge ${id} has expired, verify against another challenge or create a new challenge.`,
    ),
  totpVerificationFailed: () => new AuthError(422, 'mfa_verification_failed', 'Invalid TOTP code entered'),
  factorNameConflict: (name: string) =>
    new AuthError(422, 'mfa_factor_name_conflict', `A factor with the friendly name ${JSON.stringify(name)} for this user already exists`),
  tooManyFactors: () =>
    new AuthError(422, 'too_many_enrolled_mfa_factors', 'Maximum number of verified factors reached, unenroll to continue'),
  aal2ToEnrol: () => new AuthError(403, 'insufficient_aal', 'AAL2 required to enroll a new factor'),
  aal2ToUnenrol: () => new AuthError(422, 'insufficient_aal', 'AAL2 required to unenroll verified factor'),
  phoneEnrolDisabled: () => new AuthError(422, 'mfa_phone_enroll_not_enabled', 'MFA enroll is disabled for Phone'),
  webauthnEnrolDisabled: () => new AuthError(422, 'mfa_webauthn_enroll_not_enabled', 'MFA enroll is disabled for WebAuthn'),
  /** This idp's own budget of codes per challenge, factor and user, under GoTrue's rate-limit code. */
  tooManyMfaAttempts: (retryAfterSeconds: number) =>
    new TooManyRequestsError('over_request_rate_limit', 'Too many MFA verification attempts, try again later', retryAfterSeconds),
  unexpected: (message = 'Unexpected failure') => new AuthError(500, 'unexpected_failure', message),
  /** GoTrue has no code for a full queue; request_timeout is its code for "retry after a moment". */
  overloaded: (retryAfterSeconds: number) => new OverloadedError(retryAfterSeconds),
};
