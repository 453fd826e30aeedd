/** A small log-log line chart as an SVG string, for the bench results. No dependencies. */

export interface ChartSeries {
  readonly name: string;
  readonly points: ReadonlyArray<{ readonly x: number; readonly y: number }>;
}

export interface ChartSpec {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly ChartSeries[];
}

const WIDTH = 760;
const HEIGHT = 460;
const MARGIN = { left: 80, right: 250, top: 50, bottom: 60 };
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

export function escapeXml(text: string): string {
  return text
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/** Powers of ten covering [min, max]. */
function decades(min: number, max: number): number[] {
  const low = Math.floor(Math.log10(min));
  const high = Math.ceil(Math.log10(max));
  return Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
}

export function renderChart(spec: ChartSpec): string {
  const points = spec.series.flatMap((series) => series.points).filter((p) => p.x > 0 && p.y > 0);
  const xs = decades(
    Math.min(...points.map((p) => p.x), 10),
    Math.max(...points.map((p) => p.x), 100),
  );
  const ys = decades(
    Math.min(...points.map((p) => p.y), 1),
    Math.max(...points.map((p) => p.y), 10),
  );
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const [x0, x1] = [Math.log10(xs[0] as number), Math.log10(xs[xs.length - 1] as number)];
  const [y0, y1] = [Math.log10(ys[0] as number), Math.log10(ys[ys.length - 1] as number)];
  const px = (x: number) => MARGIN.left + ((Math.log10(x) - x0) / (x1 - x0)) * plotW;
  const py = (y: number) => MARGIN.top + plotH - ((Math.log10(y) - y0) / (y1 - y0)) * plotH;
  const fmt = (v: number) => v.toFixed(1);
  const label = (v: number) => (v >= 1 ? v.toLocaleString("en-US") : String(v));

  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12" role="img" aria-label="${escapeXml(spec.title)}">`,
    `<title>${escapeXml(spec.title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="24" text-anchor="middle" font-size="15">${escapeXml(spec.title)}</text>`,
  ];
  for (const x of xs) {
    parts.push(
      `<line x1="${fmt(px(x))}" y1="${MARGIN.top}" x2="${fmt(px(x))}" y2="${MARGIN.top + plotH}" stroke="#ddd"/>`,
      `<text x="${fmt(px(x))}" y="${MARGIN.top + plotH + 18}" text-anchor="middle">${label(x)}</text>`,
    );
  }
  for (const y of ys) {
    parts.push(
      `<line x1="${MARGIN.left}" y1="${fmt(py(y))}" x2="${MARGIN.left + plotW}" y2="${fmt(py(y))}" stroke="#ddd"/>`,
      `<text x="${MARGIN.left - 8}" y="${fmt(py(y) + 4)}" text-anchor="end">${label(y)}</text>`,
    );
  }
  parts.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 18}" text-anchor="middle">${escapeXml(spec.xLabel)} (log scale)</text>`,
    `<text transform="translate(20 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escapeXml(spec.yLabel)} (log scale)</text>`,
  );
  spec.series.forEach((series, i) => {
    const color = COLORS[i % COLORS.length] as string;
    const valid = series.points.filter((p) => p.x > 0 && p.y > 0);
    const path = valid.map((p, j) => `${j === 0 ? "M" : "L"}${fmt(px(p.x))},${fmt(py(p.y))}`);
    parts.push(
      `<path d="${path.join(" ")}" fill="none" stroke="${color}" stroke-width="2" data-series="${escapeXml(series.name)}"/>`,
    );
    for (const p of valid) {
      parts.push(`<circle cx="${fmt(px(p.x))}" cy="${fmt(py(p.y))}" r="3.5" fill="${color}"/>`);
    }
    const ly = MARGIN.top + 10 + i * 20;
    const lx = MARGIN.left + plotW + 16;
    parts.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 20}" y2="${ly}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${lx + 26}" y="${ly + 4}">${escapeXml(series.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}
