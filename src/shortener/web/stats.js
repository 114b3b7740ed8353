import uPlot from '/assets/vendor/uPlot.esm.js';
import { ApiError, api, el, formatInstant, formatNumber, say } from '/assets/api.js';

const code = decodeURIComponent(location.pathname.split('/')[2] ?? '');
const DAY = 86_400_000;
/** The longest period the visits API answers per day. */
const MAX_RANGE_DAYS = 366;
const rangeForm = document.getElementById('range-form');
const rangeError = document.getElementById('range-error');
const chartBox = document.getElementById('chart');
let chart;
const tokenForm = document.getElementById('token-form');
const detail = document.getElementById('visit-detail');
const sources = document.getElementById('sources');
/**
 * Who asks for the visits: the manage token from the stats link's fragment
 * (`#token=…`, never sent to the server in a URL or a Referer), the admin key
 * when this tab signed in on the admin page, the API key this tab gave the
 * My links page, or what is typed into the form.
 */
let credential =
  new URLSearchParams(location.hash.slice(1)).get('token') ||
  sessionStorage.getItem('shortener-admin-key') ||
  sessionStorage.getItem('shortener-api-key') ||
  '';
/** What the chart shows, kept to draw it again in the other colour scheme. */
let shown;

document.getElementById('code').textContent = code;
document.title = `Stats of ${code}: link shortener`;

async function loadLink() {
  try {
    const { data } = await api(`/api/links/${encodeURIComponent(code)}`);
    const short = document.getElementById('short-url');
    short.href = `/${data.code}`;
    short.textContent = new URL(`/${data.code}`, location.href).href;
    const original = document.getElementById('original-url');
    // A link with a password keeps its destination out of its public stats.
    if (data.original_url === undefined) original.replaceWith('Hidden: the link asks for a password');
    else {
      original.href = data.original_url;
      original.textContent = data.original_url;
    }
    const state = document.getElementById('state');
    state.textContent = data.state;
    state.className = `badge ${data.state}`;
    document.getElementById('clicks').textContent = formatNumber(data.clicks);
    document.getElementById('created').textContent = formatInstant(data.createdAt);
    document.getElementById('expires').textContent = data.expires_at ? formatInstant(data.expires_at) : 'never';
    document.getElementById('max-visits').textContent = data.max_visits ? formatNumber(data.max_visits) : 'no limit';
  } catch (err) {
    say(document.getElementById('load-error'), refusal(err));
  }
}

/** A refused request of this page, in words (the period is checked before it is asked for). */
function refusal(err) {
  if (!(err instanceof ApiError) || err.status === 0) return err.message;
  if (err.status === 404) return 'There is no short link with this code any more.';
  if (err.status === 400) return 'The service could not show this period. Choose another one.';
  if (err.status === 429) return 'Too many requests just now. Wait a moment and try again.';
  return 'The service could not answer just now. Try again in a moment.';
}

/** The query of the chosen period: presets end now; chosen dates are whole UTC days, `to` included. */
function chosenRange() {
  const preset = rangeForm.preset.value;
  const now = Date.now();
  if (preset === '24h') return { from: new Date(now - DAY), to: new Date(now), interval: 'hour', label: 'the last 24 hours, per hour' };
  if (preset !== 'custom') {
    const days = Number.parseInt(preset, 10);
    return { from: new Date(now - days * DAY), to: new Date(now), interval: 'day', label: `the last ${days} days, per day (UTC)` };
  }
  const from = rangeForm.querySelector('#from').value;
  const to = rangeForm.querySelector('#to').value;
  if (!from || !to) return { error: 'Choose both dates.' };
  const start = new Date(`${from}T00:00:00Z`);
  const end = new Date(new Date(`${to}T00:00:00Z`).getTime() + DAY);
  if (!(start < end)) return { error: 'The first date must not be after the second.' };
  if (end - start > MAX_RANGE_DAYS * DAY) return { error: `Choose a period of at most ${MAX_RANGE_DAYS} days.` };
  const interval = end - start <= 2 * DAY ? 'hour' : 'day';
  return { from: start, to: end, interval, label: `${from} to ${to}, per ${interval} (UTC)` };
}

async function loadVisits() {
  say(rangeError, '');
  const range = chosenRange();
  if (range.error) return say(rangeError, range.error);
  const query = new URLSearchParams({ from: range.from.toISOString(), to: range.to.toISOString(), interval: range.interval });
  if (!credential) return askForToken('');
  let data;
  try {
    ({ data } = await api(`/api/links/${encodeURIComponent(code)}/visits?${query}`, { token: credential }));
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      return askForToken('That token does not manage this link. Check it and try again.');
    }
    return say(rangeError, refusal(err));
  }
  tokenForm.hidden = true;
  detail.hidden = false;
  sources.hidden = false;
  loadHistory();
  document.getElementById('range-label').textContent = `Showing ${range.label}.`;
  const t = data.totals;
  document.getElementById('total-visits').textContent = formatNumber(t.visits);
  document.getElementById('total-humans').textContent = formatNumber(t.humans);
  document.getElementById('total-bots').textContent = formatNumber(t.bots);
  document.getElementById('total-previews').textContent = formatNumber(t.previews);
  document.getElementById('total-unique').textContent = formatNumber(t.unique_visitors);
  drawChart(data.series, range.interval);
  fillSeriesTable(data.series, range.interval);
  fillTopLists(data);
}

/** The destinations the link had before its changes, shown to its manager (nothing when it never changed). */
async function loadHistory() {
  const box = document.getElementById('history');
  try {
    const { data } = await api(`/api/links/${encodeURIComponent(code)}/destinations`, { token: credential });
    document
      .getElementById('history-list')
      .replaceChildren(...data.map((d) => el('li', {}, `${d.original_url} (until ${formatInstant(d.replaced_at)})`)));
    box.hidden = data.length === 0;
  } catch {
    box.hidden = true;
  }
}

/** Visits need the link's manage token (or the admin key): the public figures stay shown above. */
function askForToken(message) {
  credential = '';
  detail.hidden = true;
  sources.hidden = true;
  tokenForm.hidden = false;
  say(document.getElementById('token-error'), message);
  if (message) document.getElementById('manage-token').focus();
}

function drawChart(series, interval) {
  shown = { series, interval };
  const xs = series.map((b) => Date.parse(b.start) / 1000);
  const visits = series.map((b) => b.visits);
  const humans = series.map((b) => b.humans);
  chart?.destroy();
  const styles = getComputedStyle(document.documentElement);
  const colour = (name, fallback) => styles.getPropertyValue(name).trim() || fallback;
  // The axes in the page's own colours, so the chart reads in the dark scheme too.
  const axis = {
    stroke: colour('--text', '#1f2937'),
    grid: { stroke: colour('--line', '#d1d5db') },
    ticks: { stroke: colour('--line', '#d1d5db') },
  };
  const opts = {
    width: chartWidth(),
    height: 260,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, Math.ceil(max * 1.1))] } },
    axes: [
      { ...axis, space: interval === 'hour' ? 60 : 50 },
      { ...axis, values: (_u, ticks) => ticks.map((v) => (Number.isInteger(v) ? formatNumber(v) : '')) },
    ],
    series: [
      {},
      { label: 'Visits', stroke: colour('--primary', '#1d4ed8'), width: 2, fill: 'rgba(37, 99, 235, 0.12)' },
      { label: 'Humans', stroke: colour('--humans', '#15803d'), width: 2 },
    ],
  };
  chart = new uPlot(opts, [xs, visits, humans], chartBox);
}

const chartWidth = () => Math.max(240, chartBox.clientWidth);

function fillSeriesTable(series, interval) {
  const body = document.querySelector('#series-table tbody');
  const when = (iso) => (interval === 'hour' ? iso.slice(0, 16).replace('T', ' ') : iso.slice(0, 10));
  body.replaceChildren(
    ...series.map((b) =>
      el(
        'tr',
        {},
        el('td', {}, when(b.start)),
        el('td', { class: 'num' }, formatNumber(b.visits)),
        el('td', { class: 'num' }, formatNumber(b.humans)),
      ),
    ),
  );
}

const TOP_LISTS = [
  ['referrers', 'Top referrers', 'Referrer'],
  ['browsers', 'Browsers', 'Browser'],
  ['operating_systems', 'Operating systems', 'Operating system'],
  ['devices', 'Devices', 'Device'],
  ['countries', 'Countries', 'Country'],
];

function fillTopLists(data) {
  const box = document.getElementById('top-lists');
  box.replaceChildren(
    ...TOP_LISTS.map(([key, title, column]) => {
      const rows = data[key];
      return el(
        'div',
        { class: 'card table-wrap', id: `top-${key}` },
        el(
          'table',
          {},
          el('caption', {}, title),
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, column), el('th', { scope: 'col', class: 'num' }, 'Visits'))),
          el(
            'tbody',
            {},
            rows.length === 0
              ? el('tr', {}, el('td', { colspan: 2, class: 'muted' }, 'No visits in this period'))
              : rows.map((r) =>
                  el('tr', {}, el('td', { class: 'break' }, r.name ?? '(unknown)'), el('td', { class: 'num' }, formatNumber(r.visits))),
                ),
          ),
        ),
      );
    }),
  );
}

rangeForm.addEventListener('change', (event) => {
  if (event.target.name !== 'preset') return;
  const custom = rangeForm.preset.value === 'custom';
  document.getElementById('custom-range').hidden = !custom;
  if (custom) {
    const today = new Date().toISOString().slice(0, 10);
    const from = rangeForm.querySelector('#from');
    const to = rangeForm.querySelector('#to');
    if (!to.value) to.value = today;
    if (!from.value) from.value = new Date(Date.now() - 13 * DAY).toISOString().slice(0, 10);
    from.focus();
  } else {
    loadVisits();
  }
});
tokenForm.addEventListener('submit', (event) => {
  event.preventDefault();
  credential = tokenForm.token.value.trim();
  tokenForm.token.value = '';
  loadVisits();
});
rangeForm.addEventListener('submit', (event) => {
  event.preventDefault();
  loadVisits();
});
// The chart's colours come from the scheme: it is drawn again when the system switches between light and dark.
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
  if (shown) drawChart(shown.series, shown.interval);
});
new ResizeObserver(() => chart?.setSize({ width: chartWidth(), height: 260 })).observe(chartBox);

loadLink();
loadVisits();
