import QRCode from 'qrcode';
import type { Clock } from '../../kit/clock.js';
import { isStorableText } from '../../kit/text.js';
import { type SecretBox, base32Encode, matchingTotpStep, newTotpSecret, otpauthUri } from '../../kit/totp.js';
import type { Caller } from '../gateway.js';
import { AuthError, authErrors } from './errors.js';
import type { MfaLimits } from './mfa-limits.js';
import type { FactorRecord, MfaStore } from './store/mfa.js';
import type { SessionRow } from './store/sessions.js';
import type { UserStore } from './store/users.js';
import { type Authentication, UUID } from './authentication.js';
import { type Sessions, type TokenResponse, newRefreshToken, sha256 } from './sessions.js';
import { type Factor, type UserRow, toFactor } from './user.js';

// GoTrue's multi-factor authentication with TOTP factors (api/mfa.go): enrol a factor, challenge
// it, verify a code against the challenge, which raises the caller's session to aal2 (amr `totp`);
// unenrol. Plus the secret key's view of a user's factors (api/admin.go). Phone and WebAuthn
// factors are not offered.

export interface MfaSettings {
  challengeExpirySeconds: number;
  factorExpirySeconds: number;
  maxEnrolledFactors: number;
  maxVerifiedFactors: number;
  /** The otpauth issuer when the client names none: the host of the site URL, as GoTrue. */
  defaultIssuer: string;
}

export interface EnrolBody {
  factor_type?: string;
  friendly_name?: string;
  issuer?: string;
  phone?: string;
}

export interface EnrolResponse {
  id: string;
  type: 'totp';
  friendly_name: string;
  totp: { qr_code: string; secret: string; uri: string };
}

/** This idp's bound on the texts a client names a factor with (GoTrue has none). */
const MAX_NAME_LENGTH = 255;

function checkName(field: string, value: string): void {
  if (value.length > MAX_NAME_LENGTH) throw authErrors.validation(`${field} must be at most ${MAX_NAME_LENGTH} characters`);
  if (!isStorableText(value)) throw authErrors.validation(`${field} cannot contain U+0000 or unpaired surrogates`);
}

export class Mfa {
  constructor(
    private readonly auth: Authentication,
    private readonly sessions: Sessions,
    private readonly repo: MfaStore,
    private readonly users: UserStore,
    private readonly limits: MfaLimits,
    private readonly secrets: SecretBox,
    private readonly clock: Clock,
    private readonly settings: MfaSettings,
  ) {}

  /** GoTrue's requireAuthentication and requireNotAnonymous, which guard every /factors route. */
  private async caller(caller: Caller): Promise<{ user: UserRow; session: SessionRow }> {
    const { user, session, claims } = await this.auth.authenticate(caller);
    if (claims.is_anonymous === true) throw authErrors.anonymousNotAllowed();
    return { user, session };
  }

  /** GoTrue's loadFactor: the caller's own factor, else 404 (another user's factor is not found either). */
  private async ownedFactor(userId: string, factorId: string): Promise<FactorRecord> {
    if (!UUID.test(factorId)) throw authErrors.factorIdNotUuid();
    const factor = await this.repo.findOwnedFactor(userId, factorId);
    if (!factor) throw authErrors.factorNotFound();
    return factor;
  }

  async enrol(caller: Caller, body: EnrolBody): Promise<EnrolResponse> {
    const { user, session } = await this.caller(caller);
    switch (body.factor_type) {
      case 'totp':
        break;
      case 'phone':
        throw authErrors.phoneEnrolDisabled();
      case 'webauthn':
        throw authErrors.webauthnEnrolDisabled();
      default:
        throw authErrors.validation('factor_type needs to be totp, phone, or webauthn');
    }
    const friendlyName = body.friendly_name ?? '';
    const issuer = body.issuer || this.settings.defaultIssuer;
    checkName('friendly_name', friendlyName);
    checkName('issuer', issuer);

    const secret = newTotpSecret();
    const uri = otpauthUri(secret, user.email ?? '', issuer);
    const now = new Date(this.clock());
    const { maxEnrolledFactors, maxVerifiedFactors } = this.settings;
    const factor = await this.repo.enrol(
      {
        userId: user.id,
        friendlyName,
        sealedSecret: this.secrets.seal(secret).toString('base64'),
        now,
        unverifiedExpiresBefore: new Date(now.getTime() - this.settings.factorExpirySeconds * 1000),
      },
      // GoTrue's validateFactors, in its order.
      (factors) => {
        if (factors.some((f) => (f.friendly_name ?? '') === friendlyName)) throw authErrors.factorNameConflict(friendlyName);
        const verified = factors.filter((f) => f.status === 'verified').length;
        if (factors.length >= maxEnrolledFactors || verified >= maxVerifiedFactors) throw authErrors.tooManyFactors();
        if (verified > 0 && session.aal !== 'aal2') throw authErrors.aal2ToEnrol();
      },
    );
    if (!factor) throw authErrors.factorNameConflict(friendlyName);
    // The SVG itself, as GoTrue answers; supabase-js makes it a data: URI.
    const qrCode = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'H' });
    return { id: factor.id, type: 'totp', friendly_name: friendlyName, totp: { qr_code: qrCode, secret: base32Encode(secret), uri } };
  }

  async challenge(caller: Caller, factorId: string, ip: string): Promise<{ id: string; type: 'totp'; expires_at: number }> {
    const { user } = await this.caller(caller);
    const factor = await this.ownedFactor(user.id, factorId);
    const now = this.clock();
    const challenge = await this.repo.createChallenge(
      factor.id,
      ip,
      new Date(now),
      new Date(now - this.settings.challengeExpirySeconds * 1000),
    );
    const expiresAt = challenge.created_at.getTime() + this.settings.challengeExpirySeconds * 1000;
    return { id: challenge.id, type: 'totp', expires_at: Math.floor(expiresAt / 1000) };
  }

  async verify(caller: Caller, factorId: string, body: { challenge_id?: string; code?: string }, ip: string): Promise<TokenResponse> {
    const { user, session } = await this.caller(caller);
    const factor = await this.ownedFactor(user.id, factorId);
    const code = body.code ?? '';
    if (code === '') throw authErrors.validation('Code needs to be non-empty');
    // GoTrue decodes challenge_id into a UUID: anything else is a body it cannot parse.
    const challengeId = body.challenge_id ?? '00000000-0000-0000-0000-000000000000';
    if (!UUID.test(challengeId)) throw authErrors.badJson('challenge_id must be a UUID');

    // GoTrue's validateChallenge.
    const challenge = await this.repo.findChallenge(factor.id, challengeId, ip);
    if (!challenge) throw authErrors.challengeNotFound();
    if (challenge.verified_at !== null || !challenge.same_ip) throw authErrors.challengeIpMismatch();
    const now = this.clock();
    if (challenge.created_at.getTime() + this.settings.challengeExpirySeconds * 1000 < now) {
      await this.repo.deleteChallenge(challenge.id);
      throw authErrors.challengeExpired(challenge.id);
    }

    // Counted before the code is compared (see mfa-limits.ts).
    const budget = { challenge: challenge.id, factor: factor.id, user: user.id };
    const attempt = await this.limits.attempt(budget);
    if (!attempt.allowed) {
      if (attempt.challengeSpent) await this.repo.deleteChallenge(challenge.id);
      throw authErrors.tooManyMfaAttempts(attempt.retryAfterSeconds);
    }
    const step = matchingTotpStep(this.secrets.open(Buffer.from(factor.secret, 'base64')), code, now);
    if (step === undefined) {
      if (attempt.challengeSpent) await this.repo.deleteChallenge(challenge.id);
      throw authErrors.totpVerificationFailed();
    }

    const refreshToken = newRefreshToken();
    const outcome = await this.repo.completeVerification({
      userId: user.id,
      sessionId: session.id,
      factorId: factor.id,
      challengeId: challenge.id,
      step,
      refreshTokenHash: sha256(refreshToken),
      now: new Date(now),
    });
    switch (outcome.kind) {
      case 'session_gone':
        throw authErrors.sessionNotFound();
      case 'challenge_used':
        throw authErrors.challengeIpMismatch();
      case 'replayed':
        // The code of a time step already used: a copy of it, as good as a wrong code.
        if (attempt.challengeSpent) await this.repo.deleteChallenge(challenge.id);
        throw authErrors.totpVerificationFailed();
      case 'verified': {
        await this.limits.succeeded(budget);
        const current = await this.users.findUserById(user.id);
        if (!current) throw authErrors.userNotFound();
        return this.sessions.tokenResponse(current, outcome.session, refreshToken);
      }
    }
  }

  async unenrol(caller: Caller, factorId: string): Promise<{ id: string }> {
    const { user, session } = await this.caller(caller);
    const factor = await this.ownedFactor(user.id, factorId);
    if (factor.status === 'verified' && session.aal !== 'aal2') throw authErrors.aal2ToUnenrol();
    const deleted = await this.repo.deleteFactor(user.id, factor.id, new Date(this.clock()));
    if (!deleted) throw authErrors.factorNotFound();
    return { id: deleted.id };
  }

  // ---- the secret key's view ------------------------------------------------------------------

  private async adminUser(caller: Caller, userId: string): Promise<UserRow> {
    await this.auth.requireAdmin(caller);
    if (!UUID.test(userId)) throw new AuthError(404, 'validation_failed', 'user_id must be an UUID');
    const user = await this.users.findUserById(userId);
    if (!user) throw authErrors.userNotFound();
    return user;
  }

  async adminListFactors(caller: Caller, userId: string): Promise<Factor[]> {
    const user = await this.adminUser(caller, userId);
    return user.factors.map(toFactor);
  }

  /** Removes any factor, verified or not (the secret key needs no aal2); the factor as it was. */
  async adminDeleteFactor(caller: Caller, userId: string, factorId: string): Promise<Factor> {
    const user = await this.adminUser(caller, userId);
    if (!UUID.test(factorId)) throw authErrors.factorIdNotUuid();
    const deleted = await this.repo.deleteFactor(user.id, factorId, new Date(this.clock()));
    if (!deleted) throw authErrors.factorNotFound();
    return toFactor(deleted);
  }
}
