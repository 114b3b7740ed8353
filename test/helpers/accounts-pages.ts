import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';

// What the browser tests of the accounts pages do the same way: the accounts they need made
// through the API beforehand, and the steps a person takes on the sign-in page and in its dialogs.

/** The password of the accounts these tests make. */
export const PASSWORD = 'correct horse battery';

/**
 * An account registered through the API of the service at `origin`, over HTTP, with the password
 * PASSWORD and an address of its own: `<label>-<the time in ms>@example.com`.
 */
export async function registerAccount(origin: string, label: string, name: string): Promise<{ id: string; email: string }> {
  const email = `${label}-${Date.now()}@example.com`;
  const res = await fetch(`${origin}/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, email, password: PASSWORD }),
  });
  assert.equal(res.status, 201);
  return { id: ((await res.json()) as { data: { id: string } }).data.id, email };
}

/** Fills in the sign-in form the page shows and presses Sign in; where it leads is the caller's to wait for. */
export async function submitSignIn(page: Page, email: string, password = PASSWORD): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

/** Presses Sign out and waits for the sign-in page that says so. */
export async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();
  await page.waitForURL(/\/\?signed_out=1$/);
}

/** Confirms in the page's dialog with its button of this name, and waits for the dialog to close. */
export async function confirmWith(page: Page, name: string): Promise<void> {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  await dialog.getByRole('button', { name }).click();
  await dialog.waitFor({ state: 'hidden' });
}
