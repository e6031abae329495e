import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import ExcelJS from 'exceljs';

const run = promisify(execFile);

/** RFC 4180 CSV into rows of strings (quoted fields, doubled quotes, CRLF or LF). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let index = 0;
  const length = text.length;
  while (index < length) {
    let field: string;
    if (text[index] === '"') {
      let end = index + 1;
      let value = '';
      for (;;) {
        const quote = text.indexOf('"', end);
        if (quote === -1) throw new Error('unterminated quoted CSV field');
        value += text.slice(end, quote);
        if (text[quote + 1] === '"') {
          value += '"';
          end = quote + 2;
        } else {
          index = quote + 1;
          break;
        }
      }
      field = value;
    } else {
      let end = index;
      while (end < length && text[end] !== ',' && text[end] !== '\n' && text[end] !== '\r') end += 1;
      field = text.slice(index, end);
      index = end;
    }
    row.push(field);
    if (text[index] === ',') {
      index += 1;
      if (index === length) row.push('');
    } else {
      if (text[index] === '\r') index += 1;
      if (text[index] === '\n') index += 1;
      rows.push(row);
      row = [];
    }
  }
  if (row.length > 0) rows.push(row);
  return rows;
}

/**
 * The rows of the first sheet as exceljs reads them (values as text; dates as ISO). The whole
 * file is loaded, not streamed: exceljs' streaming writer puts styles.xml after the sheet,
 * and its streaming reader then turned a date cell into a date or into its serial number
 * (46091) depending on whether the styles had been parsed by the time the row was emitted.
 */
export async function readXlsxRows(buffer: ArrayBuffer): Promise<string[][]> {
  const workbook = new ExcelJS.Workbook();
  await workbook.xlsx.load(buffer);
  const sheet = workbook.worksheets[0];
  const rows: string[][] = [];
  let width = 0;
  sheet?.eachRow((row) => {
    const values = (row.values as unknown[]).slice(1);
    if (rows.length === 0) width = values.length;
    const cells: string[] = [];
    for (let column = 0; column < width; column += 1) {
      const value = values[column];
      cells.push(
        value === null || value === undefined ? '' : value instanceof Date ? value.toISOString() : String(value),
      );
    }
    rows.push(cells);
  });
  return rows;
}

/** Whether LibreOffice's soffice is on PATH (the XLSX reader check needs it). */
export async function hasSoffice(): Promise<boolean> {
  try {
    await run('soffice', ['--version'], { timeout: 60_000 });
    return true;
  } catch {
    return false;
  }
}

/**
 * Converts an XLSX to CSV with headless LibreOffice, a real spreadsheet reader, and
 * returns the CSV rows. A private profile directory lets runs happen side by side.
 */
export async function libreOfficeCsv(buffer: ArrayBuffer): Promise<string[][]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gantry-xlsx-'));
  try {
    const input = path.join(dir, 'export.xlsx');
    writeFileSync(input, Buffer.from(buffer));
    await run(
      'soffice',
      [
        `-env:UserInstallation=file://${dir}/profile`,
        '--headless',
        '--norestore',
        '--convert-to',
        'csv:Text - txt - csv (StarCalc):44,34,76,1',
        '--outdir',
        dir,
        input,
      ],
      { timeout: 180_000 },
    );
    return parseCsv(readFileSync(path.join(dir, 'export.csv'), 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
