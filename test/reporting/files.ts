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
  let field = '';
  let quoted = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index] as string;
    if (quoted) {
      if (char === '"' && text[index + 1] === '"') {
        field += '"';
        index += 1;
      } else if (char === '"') quoted = false;
      else field += char;
    } else if (char === '"') quoted = true;
    else if (char === ',') {
      row.push(field);
      field = '';
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && text[index + 1] === '\n') index += 1;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += char;
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}

/** The rows of the first sheet as exceljs reads them (values as text; dates as ISO). */
export async function readXlsxRows(buffer: ArrayBuffer): Promise<string[][]> {
  const workbook = new ExcelJS.Workbook();
  await workbook.xlsx.load(buffer);
  const sheet = workbook.worksheets[0];
  if (!sheet) throw new Error('workbook has no sheet');
  const rows: string[][] = [];
  const width = sheet.columnCount;
  sheet.eachRow({ includeEmpty: true }, (row) => {
    const values: string[] = [];
    for (let column = 1; column <= width; column += 1) {
      const value = row.getCell(column).value;
      values.push(value === null || value === undefined ? '' : value instanceof Date ? value.toISOString() : String(value));
    }
    rows.push(values);
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
      [`-env:UserInstallation=file://${dir}/profile`, '--headless', '--norestore', '--convert-to', 'csv:Text - txt - csv (StarCalc):44,34,76,1', '--outdir', dir, input],
      { timeout: 180_000 },
    );
    return parseCsv(readFileSync(path.join(dir, 'export.csv'), 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
