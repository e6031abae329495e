import { basePaths } from '../../http/route.ts';
import { escapeHtml } from '../docs/pages.ts';

export const CONSOLE_PATH = '/console';

export interface ConsoleSettings {
  /** Optional base map: an http(s) tile URL template ({z}/{x}/{y}); none draws the map on a plain background. */
  tileUrl: string | undefined;
  tileAttribution: string | undefined;
}

/** `https://{s}.tiles.example.com/{z}/…` → `https://*.tiles.example.com`: the origin(s) tiles come from. */
export function tileOrigin(template: string): string {
  const origin = /^https?:\/\/[^/]+/.exec(template)?.[0] ?? '';
  return origin.replace(/\{[^}]*\}/g, '*');
}

/**
 * The console's Content-Security-Policy: code, styles and data from the API itself only,
 * no inline script or style. The one outside origin it may name is the configured tile
 * server's, for images only.
 */
export function consolePolicy(settings: ConsoleSettings): string {
  const tiles = settings.tileUrl ? ` ${tileOrigin(settings.tileUrl)}` : '';
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src 'self' data:${tiles}`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The one HTML page: an empty shell that loads the app's modules. Settings travel in
 * <meta> tags because an inline script would need a weaker policy.
 */
export function renderConsolePage(settings: ConsoleSettings, modules: string[]): string {
  const meta = (name: string, value: string | undefined) =>
    value === undefined ? '' : `<meta name="${name}" content="${escapeHtml(value)}">\n`;
  const preloads = modules
    .map((module) => `<link rel="modulepreload" href="${CONSOLE_PATH}/${escapeHtml(module)}">\n`)
    .join('');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>Gantry console</title>
<link rel="icon" href="data:,">
${meta('gantry-api-base', basePaths.external)}${meta('gantry-tile-url', settings.tileUrl)}${meta('gantry-tile-attribution', settings.tileAttribution)}<link rel="stylesheet" href="${CONSOLE_PATH}/vendor/leaflet.css">
<link rel="stylesheet" href="${CONSOLE_PATH}/vendor/uplot.css">
<link rel="stylesheet" href="${CONSOLE_PATH}/assets/console.css">
${preloads}<script type="module" src="${CONSOLE_PATH}/assets/app.js"></script>
</head>
<body>
<div id="app"><p class="boot">Loading the Gantry console…</p></div>
<noscript><p class="boot">The Gantry console needs JavaScript.</p></noscript>
</body>
</html>
`;
}
