/**
 * The token of a mailed link (`#token=…`), taken out of the address bar and
 * the tab's history at once: the fragment never reaches a server or a
 * Referer, and once read it is not left for whoever looks at the screen next.
 */
export function takeTokenFromFragment() {
  const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
  if (location.hash) history.replaceState(null, '', location.pathname + location.search);
  return token;
}
