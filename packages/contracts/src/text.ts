/// <reference lib="es2024.string" />

// Text that cannot be kept as it was sent: a lone surrogate (a \uD800–\uDFFF escape in
// JSON with no partner) has no UTF-8 form, so writing it turns it into U+FFFD, and
// PostgreSQL's jsonb refuses it. The API refuses such text with a 400 and ingest keeps
// such a message in bronze as rejected; both find it with these two functions.

function joinPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path === '' ? key : `${path}.${key}`;
}

/**
 * The path (`title`, `items[2].name`; '' for the value itself) of the first string or
 * object key in a parsed JSON value that is not well-formed Unicode, or null.
 * Iterative: bodies may nest deeply.
 */
export function findIllFormedText(value: unknown): string | null {
  const pending: { value: unknown; path: string }[] = [{ value, path: '' }];
  while (pending.length > 0) {
    const { value: current, path } = pending.pop()!;
    if (typeof current === 'string') {
      if (!current.isWellFormed()) return path;
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--)
        pending.push({ value: current[index], path: joinPath(path, index) });
    } else if (current !== null && typeof current === 'object') {
      const entries = Object.entries(current);
      for (let index = entries.length - 1; index >= 0; index--) {
        const [key, inner] = entries[index]!;
        const innerPath = joinPath(path, key);
        if (!key.isWellFormed()) return innerPath;
        pending.push({ value: inner, path: innerPath });
      }
    }
  }
  return null;
}

/**
 * Whether JSON text decoded strictly from UTF-8 can hold a lone surrogate once parsed:
 * only an escape \uD800–\uDFFF makes one, so text without such an escape needs no walk.
 */
export function mayHoldSurrogateEscape(text: string): boolean {
  return /\\u[dD][89a-fA-F]/.test(text);
}
