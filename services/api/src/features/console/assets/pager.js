// Previous/next through a list the API pages: "1–100 of 10,000" and two buttons.
import { html } from '../vendor/lit-html.js';
import { count } from './format.js';

/** The range shown and the buttons; `go(offset)` asks for another page. */
export function pager({ offset, limit, total, shown, noun, go }) {
  const first = shown === 0 ? 0 : offset + 1;
  const last = offset + shown;
  return html`<div class="pager">
    <span class="pager-range" role="status">${shown === 0 ? `0 ${noun}` : `${count(first)}–${count(last)} of ${count(total)} ${noun}`}</span>
    <span class="pager-buttons">
      <button type="button" class="button small" ?disabled=${offset === 0} @click=${() => go(Math.max(0, offset - limit))}>
        ← Previous</button>
      <button type="button" class="button small" ?disabled=${last >= total} @click=${() => go(offset + limit)}>
        Next →</button>
    </span>
  </div>`;
}
