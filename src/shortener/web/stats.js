import uPlot from '/assets/vendor/uPlot.esm.js';
import { ApiError, api, el, formatInstant, formatNumber, say } from '/assets/api.js';

const code = decodeURIComponent(location.pathname.split('/')[2] ?? '');
const DAY = 86_400_000;
const rangeForm = document.getElementById('range-form');
const rangeError = document.getElementById('range-error');
const chartBox = document.getElementById('chart');
let chart;

document.getElementById('code').textContent = code;
document.title = `Stats of ${code}: link shortener`;

async function loadLink() {
  try {
    const { data } = await api(`/api/links/${encodeURIComponent(code)}`);
    const short = document.getElementById('short-url');
    short.href = `/${data.code}`;
    short.textContent = new URL(`/${data.code}`, location.href).href;
    const original = document.getElementById('original-url');
    original.href = data.original_url;
    original.textContent = data.original_url;
    const state = document.getElementById('state');
    state.textContent = data.state;
    state.className = `badge ${data.state}`;
    document.getElementById('clicks').textContent = formatNumber(data.clicks);
    document.getElementById('created').textContent = formatInstant(data.createdAt);
    document.getElementById('expires').textContent = data.expires_at ? formatInstant(data.expires_at) : 'never';
    document.getElementById('max-visits').textContent = data.max_visits ? formatNumber(data.max_visits) : 'no limit';
  } catch (err) {
    say(document.getElementById('load-error'), err.message);
  }
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
  const interval = end - start <= 2 * DAY ? 'hour' : 'day';
  return { from: start, to: end, interval, label: `${from} to ${to}, per ${interval} (UTC)` };
}

async function loadVisits() {
  say(rangeError, '');
  const range = chosenRange();
  if (range.error) return say(rangeError, range.error);
  const query = new URLSearchParams({ from: range.from.toISOString(), to: range.to.toISOString(), interval: range.interval });
  let data;
  try {
    ({ data } = await api(`/api/links/${encodeURIComponent(code)}/visits?${query}`));
  } catch (err) {
    return say(rangeError, err instanceof ApiError ? err.message : String(err));
  }
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

function drawChart(series, interval) {
  const xs = series.map((b) => Date.parse(b.start) / 1000);
  const visits = series.map((b) => b.visits);
  const humans = series.map((b) => b.humans);
  chart?.destroy();
  const styles = getComputedStyle(document.documentElement);
  const opts = {
    width: chartWidth(),
    height: 260,
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, Math.ceil(max * 1.1))] } },
    axes: [{ space: interval === 'hour' ? 60 : 50 }, { values: (_u, ticks) => ticks.map((v) => (Number.isInteger(v) ? formatNumber(v) : '')) }],
    series: [
      {},
      { label: 'Visits', stroke: styles.getPropertyValue('--primary').trim() || '#1d4ed8', width: 2, fill: 'rgba(29, 78, 216, 0.08)' },
      { label: 'Humans', stroke: '#15803d', width: 2 },
    ],
  };
  chart = new uPlot(opts, [xs, visits, humans], chartBox);
}

const chartWidth = () => Math.max(240, chartBox.clientWidth);

function fillSeriesTable(series, interval) {
  const body = document.querySelector('#series-table tbody');
  const when = (iso) => (interval === 'hour' ? iso.slice(0, 16).replace('T', ' ') : iso.slice(0, 10));
  body.replaceChildren(
    ...series.map((b) => el('tr', {}, el('td', {}, when(b.start)), el('td', { class: 'num' }, formatNumber(b.visits)), el('td', { class: 'num' }, formatNumber(b.humans)))),
  );
}

const TOP_LISTS = [
  ['referrers', 'Top referrers', 'Referrer'],
  ['browsers', 'Browsers', 'Browser'],
  ['operating_systems', 'Operating systems', 'Operating system'],
  ['devices', 'Devices', 'Device'],
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
              : rows.map((r) => el('tr', {}, el('td', { class: 'break' }, r.name), el('td', { class: 'num' }, formatNumber(r.visits)))),
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
rangeForm.addEventListener('submit', (event) => {
  event.preventDefault();
  loadVisits();
});
new ResizeObserver(() => chart?.setSize({ width: chartWidth(), height: 260 })).observe(chartBox);

loadLink();
loadVisits();
