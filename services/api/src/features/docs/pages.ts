import { readFileSync } from 'node:fs';
import MarkdownIt from 'markdown-it';
import { basePaths, type RouteSpec } from '../../http/route.ts';
import { openApiPath } from './openapi.ts';

/** Where the pages' own files are served (CSS, the reference's loader and swagger-ui). */
export const ASSET_PATH = `${basePaths.external}/docs/assets`;

/** Content-Security-Policy of each page: only the API's own files, no inline code. */
export const pagePolicies = {
  guide:
    "default-src 'none'; style-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  reference:
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
} as const;

export interface GuideValues {
  baseUrl: string;
  ratePoints: number;
  rateWindowSeconds: number;
  ratePerSecond: number;
  rateBurst: number;
  exportPoints: number;
  exportWindowSeconds: number;
  maxJsonBytes: number;
  maxUploadBytes: number;
  requestTimeoutSeconds: number;
  webhookMaxAttempts: number;
  webhookBackoff: string;
  webhookTimeoutSeconds: number;
}

const guideSource = readFileSync(new URL('./guide.md', import.meta.url), 'utf8');

const markdown = new MarkdownIt({ html: false, linkify: false, typographer: false });

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

// Headings get ids so the table of contents and other pages can link to sections.
markdown.renderer.rules.heading_open = (tokens, index, options, _env, self) => {
  const inline = tokens[index + 1];
  if (inline?.type === 'inline') tokens[index]!.attrSet('id', slug(inline.content));
  return self.renderToken(tokens, index, options);
};

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function tableCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s+/g, ' ').trim();
}

/** A markdown table per tag of every published endpoint, straight from the registry. */
export function endpointIndex(routes: RouteSpec[]): string {
  const published = routes.filter((route) => route.base === 'external' && !route.hidden);
  const tags = [...new Set(published.map((route) => route.tags[0] ?? 'Other'))];
  return tags
    .map((tag) => {
      const rows = published
        .filter((route) => (route.tags[0] ?? 'Other') === tag)
        .map((route) => {
          const notes = [
            route.auth === 'public' ? 'public' : null,
            route.tenantKeyOnly ? 'tenant key' : null,
            route.deprecated ? 'deprecated' : null,
          ]
            .filter(Boolean)
            .join(', ');
          return `| ${route.method.toUpperCase()} | \`${tableCell(openApiPath(route))}\` | ${tableCell(route.summary)}${notes ? ` (${notes})` : ''} |`;
        });
      return [`### ${tableCell(tag)}`, '', '| method | path | what |', '|---|---|---|', ...rows].join('\n');
    })
    .join('\n\n');
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (whole, name: string) => values[name] ?? whole);
}

function page(title: string, head: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
${head}
</head>
<body>
${body}
</body>
</html>
`;
}

/** The guide: guide.md with the deployment's numbers filled in and the endpoint index. */
export function renderGuide(routes: RouteSpec[], values: GuideValues): string {
  const source = fill(guideSource, {
    ...Object.fromEntries(Object.entries(values).map(([name, value]) => [name, String(value)])),
    docsPath: `${basePaths.external}/docs`,
    openapiPath: `${basePaths.external}/openapi.json`,
    endpointIndex: endpointIndex(routes),
  });
  const tokens = markdown.parse(source, {});
  const contents = tokens
    .map((token, index) => ({ token, inline: tokens[index + 1] }))
    .filter(({ token }) => token.type === 'heading_open' && token.tag === 'h2')
    .map(({ inline }) => `<li><a href="#${slug(inline?.content ?? '')}">${escapeHtml(inline?.content ?? '')}</a></li>`)
    .join('\n');
  const html = markdown.renderer.render(tokens, markdown.options, {});
  return page(
    'Gantry external API — guide',
    `<link rel="stylesheet" href="${ASSET_PATH}/guide.css">`,
    `<nav class="contents" aria-label="Contents">
<p><strong>Gantry API</strong></p>
<ul>
${contents}
</ul>
<p><a href="${basePaths.external}/docs">API reference</a><br><a href="${basePaths.external}/openapi.json">openapi.json</a></p>
</nav>
<main class="guide">
${html}
</main>`,
  );
}

/** The reference: swagger-ui, from the API's own dependencies, reading /openapi.json. */
export function renderReference(swaggerUiVersion: string): string {
  const v = encodeURIComponent(swaggerUiVersion);
  return page(
    'Gantry external API — reference',
    `<link rel="stylesheet" href="${ASSET_PATH}/swagger-ui.css?v=${v}">
<link rel="stylesheet" href="${ASSET_PATH}/reference.css">`,
    `<header class="gantry-bar"><a href="${basePaths.external}/guide">Guide</a> · <a href="${basePaths.external}/openapi.json">openapi.json</a></header>
<div id="reference" data-spec-url="${basePaths.external}/openapi.json"></div>
<noscript>The reference needs JavaScript; the same content is in <a href="${basePaths.external}/openapi.json">openapi.json</a> and the <a href="${basePaths.external}/guide#every-endpoint">guide's endpoint index</a>.</noscript>
<script src="${ASSET_PATH}/swagger-ui-bundle.js?v=${v}"></script>
<script src="${ASSET_PATH}/reference.js"></script>`,
  );
}
