// The redirect allow-list against the URLs that bypassed it when it was matched as a string: a
// backslash or a wildcard that crossed the host, user-info, control characters, and the app URL's
// host on another port or scheme. Each is checked through the policy and through a real link.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RedirectPolicy } from '../src/idp/auth/redirects.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { uniqueEmail } from './helpers/emails.js';
import { serviceClient } from './helpers/supabase.js';

const APP = 'http://127.0.0.1:4100';
const LIST = ['https://*.example.com/**', 'https://**.vercel.app/**', 'http://localhost:*/cb', 'https://app-*.example.net/in/*'];
const policy = new RedirectPolicy(APP, LIST);

const refused: string[] = [
  // The two bypasses: a backslash that the URL parser turns into a path, a `**` that crossed into the path.
  'https://1572395042\\x.example.com/cb',
  'https://evil.example/.vercel.app/',
  'https://evil.example/x.vercel.app/cb',
  'https://evil.example?.vercel.app/',
  'https://evil.example#.vercel.app/',
  // User-info: the host is after the `@`.
  'https://a.example.com@evil.example/cb',
  'https://a.example.com:pw@evil.example/',
  'https://user@a.example.com/cb',
  // Control characters and whitespace.
  'https://a.example.com\t/cb',
  'https://a.exam\nple.com/cb',
  'https://a.example.com/c\u0000b',
  'https://a.example.com /cb',
  'https://a.example.com%2fevil.example/',
  // The wildcard is one label, not several, not none.
  'https://a.b.example.com/cb',
  'https://.example.com/cb',
  'https://example.com/cb',
  'https://vercel.app/',
  // The app URL's host, another port or scheme (and the allow list's port).
  'http://127.0.0.1:4444/steal',
  'https://127.0.0.1/steal',
  'https://127.0.0.1:4100/steal',
  'https://localhost:3000/cb',
  // The path is matched segment by segment.
  'https://app-eu.example.net/in/a/b',
  'https://app-eu.example.net/out/x',
  'https://app.eu.example.net/in/x',
  // Other schemes.
  'javascript://a.example.com/%0aalert(1)',
  'ftp://a.example.com/',
  'not a url',
];

const allowed: Array<[string, string]> = [
  ['https://a.example.com/cb', 'https://a.example.com/cb'],
  ['https://A.Example.COM/deep/page?x=1#f', 'https://a.example.com/deep/page?x=1#f'],
  ['https://my-app.vercel.app/', 'https://my-app.vercel.app/'],
  ['https://pr-1.team.vercel.app/auth', 'https://pr-1.team.vercel.app/auth'],
  ['http://localhost:3000/cb', 'http://localhost:3000/cb'],
  ['https://app-eu.example.net/in/x', 'https://app-eu.example.net/in/x'],
  ['http://127.0.0.1:4100/reset', 'http://127.0.0.1:4100/reset'],
  ['https://a.example.com:443/cb', 'https://a.example.com/cb'],
];

describe('redirect allow-list', () => {
  test('refuses every bypass', () => {
    for (const url of refused) assert.equal(policy.resolve(url), APP, JSON.stringify(url));
  });

  test('keeps what the list and the app origin allow, normalised', () => {
    for (const [url, expected] of allowed) assert.equal(policy.resolve(url), expected, url);
  });

  describe('through a real link', () => {
    let idp: RunningIdp;
    before(async () => {
      idp = await startIdp({ env: { IDP_APP_URL: APP, IDP_REDIRECT_URLS: LIST.join(',') } });
    });
    after(async () => {
      await idp?.close();
    });

    test("GET /verify sends the session only to the app URL for the issue's bypasses", async () => {
      const user = await createUser(idp, uniqueEmail('redirect-bypass'));
      for (const requested of [
        'https://1572395042\\x.example.com/cb',
        'https://evil.example/.vercel.app/',
        'http://127.0.0.1:4444/steal',
        'https://127.0.0.1/steal',
      ]) {
        const { data, error } = await serviceClient(idp).auth.admin.generateLink({ type: 'magiclink', email: user.email });
        assert.equal(error, null);
        const link = new URL(data.properties!.action_link);
        link.searchParams.set('redirect_to', requested);
        const res = await fetch(link, { redirect: 'manual' });
        await res.arrayBuffer();
        assert.equal(res.status, 303);
        const location = new URL(res.headers.get('location')!);
        assert.equal(location.origin, APP, requested);
        assert.ok(location.hash.includes('access_token='));
      }
    });
  });
});
