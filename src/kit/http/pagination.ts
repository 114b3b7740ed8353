/** Where a listing is: its page, page size and last page. */
export interface PagePosition {
  page: number;
  perPage: number;
  lastPage: number;
}

/**
 * The RFC 8288 Link header of a paged listing: first, prev, next and last, relative to `path`,
 * each keeping the listing's filters (`filters`: name → value, URL-encoded here, undefined left out).
 */
export function paginationLinks(
  path: string,
  { page, perPage, lastPage }: PagePosition,
  filters: Record<string, string | undefined> = {},
): string {
  const kept = Object.entries(filters)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `&${encodeURIComponent(name)}=${encodeURIComponent(value)}`)
    .join('');
  const link = (n: number, rel: string) => `<${path}?page=${n}&per_page=${perPage}${kept}>; rel="${rel}"`;
  const links = [link(1, 'first')];
  if (page > 1) links.push(link(Math.min(page - 1, lastPage), 'prev'));
  if (page < lastPage) links.push(link(page + 1, 'next'));
  links.push(link(lastPage, 'last'));
  return links.join(', ');
}
