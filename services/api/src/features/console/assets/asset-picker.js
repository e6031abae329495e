// A type-ahead asset picker (an ARIA combobox): what is typed is searched by the API
// (GET /telemetry/devices?q=…&limit=20, whose search covers asset name, identifier,
// display code and device id), so it finds one asset among thousands without listing
// them all. Arrow keys move through the options, Enter picks, Escape closes.
import { html, nothing } from '../vendor/lit-html.js';
import { debounce, get } from './api.js';
import { errorText } from './format.js';

const OPTIONS = 20;
const SEARCH_DELAY_MS = 250;

/**
 * `onPick({ id, name } | null)` is called with the asset picked (null: the whole fleet);
 * `draw()` redraws the page holding the picker.
 */
export function assetPicker({ id, onPick, draw }) {
  const state = { text: '', options: [], open: false, active: -1, picked: null, searching: false, error: null };

  const search = debounce(async () => {
    const asked = state.text.trim();
    if (!asked) {
      Object.assign(state, { options: [], open: false, searching: false });
      draw();
      return;
    }
    try {
      const body = await get('/telemetry/devices', { q: asked, limit: OPTIONS });
      if (asked !== state.text.trim()) return;
      // An asset with two devices is one option.
      const byAsset = new Map();
      for (const device of body.items)
        if (!byAsset.has(device.assetId))
          byAsset.set(device.assetId, {
            id: device.assetId,
            name: device.assetName,
            identifier: device.assetIdentifier,
          });
      Object.assign(state, { options: [...byAsset.values()], open: true, active: -1, error: null });
    } catch (error) {
      Object.assign(state, { options: [], open: true, error });
    }
    state.searching = false;
    draw();
  }, SEARCH_DELAY_MS);

  function pick(asset) {
    Object.assign(state, { picked: asset, text: asset ? asset.name : '', options: [], open: false, active: -1 });
    draw();
    onPick(asset);
  }

  function keydown(event) {
    const last = state.options.length - 1;
    if (event.key === 'ArrowDown' && state.options.length) {
      state.open = true;
      state.active = state.active >= last ? 0 : state.active + 1;
    } else if (event.key === 'ArrowUp' && state.options.length) {
      state.open = true;
      state.active = state.active <= 0 ? last : state.active - 1;
    } else if (event.key === 'Enter' && state.open && state.active >= 0) {
      pick(state.options[state.active]);
    } else if (event.key === 'Escape' && state.open) {
      state.open = false;
    } else {
      return;
    }
    event.preventDefault();
    draw();
  }

  const listId = `${id}-options`;
  const optionId = (index) => `${id}-option-${index}`;

  return {
    view() {
      const expanded = state.open && (state.options.length > 0 || state.error || !state.searching);
      return html`<div class="picker">
        <label for=${id}>Scope</label>
        <div class="picker-box">
          <input id=${id} type="text" role="combobox" autocomplete="off" spellcheck="false"
            placeholder="Whole fleet · type to find an asset" aria-autocomplete="list" aria-controls=${listId}
            aria-expanded=${expanded ? 'true' : 'false'}
            aria-activedescendant=${state.open && state.active >= 0 ? optionId(state.active) : nothing}
            .value=${state.text}
            @input=${(event) => {
              state.text = event.target.value;
              state.searching = true;
              draw();
              search();
            }}
            @keydown=${keydown}
            @blur=${() => {
              // What was typed but not picked goes: the box shows what the page shows.
              Object.assign(state, { open: false, text: state.picked?.name ?? '' });
              draw();
            }}>
          <ul id=${listId} class="picker-options" role="listbox" aria-label="Assets found" ?hidden=${!expanded}>
            ${state.options.map(
              (
                asset,
                index,
              ) => html`<li id=${optionId(index)} role="option" aria-selected=${index === state.active ? 'true' : 'false'}
                class=${index === state.active ? 'active' : ''}
                @mousedown=${(event) => {
                  // Before the input's blur closes the list.
                  event.preventDefault();
                  pick(asset);
                }}>
                <span class="strong">${asset.name}</span> <span class="sub">${asset.identifier}</span>
              </li>`,
            )}
            ${
              state.error
                ? html`<li class="empty" role="presentation">${errorText(state.error)}</li>`
                : state.options.length === 0
                  ? html`<li class="empty" role="presentation">No asset matches.</li>`
                  : nothing
            }
          </ul>
        </div>
        ${
          state.picked
            ? html`<button type="button" class="button small" @click=${() => pick(null)}>Whole fleet</button>`
            : nothing
        }
      </div>`;
    },
  };
}
