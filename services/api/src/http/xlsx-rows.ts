/**
 * Rows for exceljs' streaming worksheet writer without its document model.
 *
 * `worksheet.addRow(values).commit()` builds a Row, a Cell per value (each parsing and
 * re-encoding its A1 address, each with a Value object), then asks the Row for the plain
 * model `{ number, cells: [{ address, type, value, style }] }` that exceljs' RowXform
 * renders, and throws the objects away. For a 50,000-row page that detour was a third of
 * the time spent in exceljs. This writer builds the model directly and hands it to the
 * writer's own steps — RowXform.prepare (style ids, through the workbook's style cache)
 * and RowXform.toXml — writing the XML to the sheet's stream, as WorksheetWriter._writeRow
 * does: same renderer, same bytes.
 *
 * It uses exceljs 4 internals (the worksheet writer's stream, workbook styles and row
 * cursor, and lib/xlsx/xform/sheet/row-xform). `sheetRowWriter` checks that they are
 * there and returns undefined otherwise, and the caller falls back to addRow.
 */
import { createRequire } from 'node:module';
import ExcelJS from 'exceljs';

export interface CellModel {
  address: string;
  type: ExcelJS.ValueType;
  value?: number | string | Date;
  style: Partial<ExcelJS.Style>;
}

interface RowModel {
  cells: CellModel[];
  number: number;
  min: number;
  max: number;
  style: Partial<ExcelJS.Style>;
}

interface RowXform {
  prepare(model: RowModel, options: object): void;
  toXml(model: RowModel): string;
}

/** What this module reads of exceljs' WorksheetWriter. */
interface WorksheetWriterInternals {
  stream: { write(xml: string | Buffer): unknown };
  _workbook: { styles: { addStyleModel(style: Partial<ExcelJS.Style>, type: ExcelJS.ValueType): number } };
  _rowZero: number;
  _rows: unknown[] | null;
  /** True once the columns and <sheetData> are written (by the first committed row). */
  startedData: boolean;
  _merges: unknown;
  _formulae: unknown;
  _siFormulae: unknown;
  _sheetRelsWriter: { hyperlinksProxy: unknown };
}

function loadRowXform(): (new () => RowXform) | undefined {
  try {
    const require = createRequire(import.meta.url);
    const xform = require('exceljs/lib/xlsx/xform/sheet/row-xform.js') as unknown;
    return typeof xform === 'function' ? (xform as new () => RowXform) : undefined;
  } catch {
    return undefined;
  }
}

const RowXformClass = loadRowXform();

function hasInternals(sheet: unknown): sheet is WorksheetWriterInternals {
  const writer = sheet as Partial<WorksheetWriterInternals> | null;
  return (
    typeof writer?.stream?.write === 'function' &&
    typeof writer._workbook?.styles?.addStyleModel === 'function' &&
    typeof writer._rowZero === 'number' &&
    Array.isArray(writer._rows) &&
    writer.startedData === true &&
    typeof writer._sheetRelsWriter === 'object'
  );
}

/** Spreadsheet column letters: A … Z, AA … */
function columnLetters(count: number): string[] {
  return Array.from({ length: count }, (_, index) => {
    let letters = '';
    for (let n = index + 1; n > 0; n = Math.floor((n - 1) / 26)) {
      letters = String.fromCharCode(65 + ((n - 1) % 26)) + letters;
    }
    return letters;
  });
}

/**
 * Writes rows of `width` cells after the rows already committed (the header row): the
 * caller builds each cell's model, addressed `letters[column] + nextRow`.
 */
export interface SheetRowWriter {
  readonly letters: string[];
  readonly nextRow: number;
  write(cells: CellModel[]): void;
}

export function sheetRowWriter(
  sheet: ExcelJS.Worksheet,
  width: number,
  rowStyle: Partial<ExcelJS.Style>,
): SheetRowWriter | undefined {
  if (!RowXformClass || !hasInternals(sheet)) return undefined;
  const writer = sheet;
  const xform = new RowXformClass();
  const letters = columnLetters(width);
  return {
    letters,
    get nextRow() {
      return writer._rowZero;
    },
    write(cells) {
      // Everything before this row must already be written (the header row is committed).
      if (writer._rows?.length) throw new Error('uncommitted rows before a directly written row');
      // exceljs leaves a row without a value out of the sheet (Row.hasValues).
      if (!cells.some((cell) => cell.type !== ExcelJS.ValueType.Null)) {
        writer._rowZero += 1;
        return;
      }
      const model: RowModel = { cells, number: writer._rowZero, min: 1, max: width, style: rowStyle };
      const options = {
        styles: writer._workbook.styles,
        sharedStrings: undefined,
        hyperlinks: writer._sheetRelsWriter.hyperlinksProxy,
        merges: writer._merges,
        formulae: writer._formulae,
        siFormulae: writer._siFormulae,
        comments: [],
      };
      xform.prepare(model, options);
      writer.stream.write(xform.toXml(model));
      writer._rowZero += 1;
    },
  };
}

/**
 * Writes data rows whose XML was rendered elsewhere (PostgreSQL, xlsx-sql.ts) after the
 * rows already committed (the header row): the XML goes to the sheet's stream as it is,
 * and `skipRows` then moves exceljs' row cursor past the rows written.
 */
export interface SheetXmlWriter {
  /** Number of the first row to write. */
  readonly nextRow: number;
  /**
   * The style ids exceljs gives the export's two cell styles (export.ts' PLAIN_STYLE and
   * TIMESTAMP_STYLE), registering them in the workbook's styles as its renderer would;
   * `plainType` is the type of the first plain cell it would have seen.
   */
  styleIds(plainType: ExcelJS.ValueType): { plain: number; date: number };
  write(xml: Buffer): void;
  skipRows(count: number): void;
}

export function sheetXmlWriter(
  sheet: ExcelJS.Worksheet,
  styles: { plain: Partial<ExcelJS.Style>; date: Partial<ExcelJS.Style> },
): SheetXmlWriter | undefined {
  if (!hasInternals(sheet)) return undefined;
  const writer = sheet;
  if (writer._rows?.length) throw new Error('uncommitted rows before directly written rows');
  return {
    get nextRow() {
      return writer._rowZero;
    },
    styleIds(plainType) {
      const registry = writer._workbook.styles;
      return {
        date: registry.addStyleModel(styles.date, ExcelJS.ValueType.Date),
        plain: registry.addStyleModel(styles.plain, plainType),
      };
    },
    write(xml) {
      writer.stream.write(xml);
    },
    skipRows(count) {
      writer._rowZero += count;
    },
  };
}
