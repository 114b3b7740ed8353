import { dictionary } from '@zxcvbn-ts/language-common';

// NIST SP 800-63B (5.1.1.2) asks a verifier to refuse passwords found in lists of commonly used or
// breached passwords. The list is zxcvbn-ts's common-password dictionary (about 49,000 passwords seen
// most often in public breach corpora, MIT licensed), kept with the package rather than by hand.
// Both services that take passwords (accounts, the idp) check against it.

let common: Set<string> | undefined;

/** True when the password, ignoring case, is one of the commonly used passwords. */
export function isCommonPassword(password: string): boolean {
  common ??= new Set(dictionary['passwords-common'] as string[]);
  return common.has(password.toLowerCase());
}

/** What a person is told when their password is on the list. */
export const COMMON_PASSWORD_MESSAGE = 'This password is one of the most commonly used passwords; choose one that is harder to guess';
