import { PassThrough } from 'node:stream';
import ExcelJS from 'exceljs';
import { describe, expect, it } from 'vitest';
import { sheetRowWriter, type CellModel } from './xlsx-rows.ts';

const DATE_STYLE: Partial<ExcelJS.Style> = { numFmt: 'yyyy-mm-dd hh:mm:ss.000' };
const PLAIN: Partial<ExcelJS.Style> = {};
const rows: Array<[string | null, number | null, Date | null]> = [
  ['first <&> "row"', 1.5, new Date('2026-03-04T05:06:07.089Z')],
  [null, null, null],
  [null, 7, null],
  ['fourth', -42, new Date('2026-12-31T23:59:59.999Z')],
  ["it's \u00e9t\u00e9 \u2013 \u{1F69C}", 0.1 + 0.2, new Date('1969-07-20T20:17:40.000Z')],
  ['', 1e21, null],
  ['  spaces\tand\nlines  ', -0.000001, new Date('2026-11-26T00:00:00.000Z')],
];

/**
 * A workbook of `rows` under a header, its data rows written by `writeRows`, and the XML
 * its rows were written to the sheet stream as.
 */
async function workbook(writeRows: (sheet: ExcelJS.Worksheet) => void): Promise<{ file: Buffer; rowsXml: string[] }> {
  const output = new PassThrough();
  const chunks: Buffer[] = [];
  output.on('data', (chunk: Buffer) => chunks.push(chunk));
  const book = new ExcelJS.stream.xlsx.WorkbookWriter({ stream: output, useStyles: true, useSharedStrings: false });
  const sheet = book.addWorksheet('Export');
  sheet.columns = [
    { header: 'label', key: 'label' },
    { header: 'n', key: 'n' },
    { header: 'at', key: 'at', style: DATE_STYLE },
  ];
  sheet.getRow(1).commit();
  const stream = (sheet as unknown as { stream: { write(xml: unknown): unknown } }).stream;
  const write = stream.write.bind(stream);
  const rowsXml: string[] = [];
  stream.write = (xml: unknown) => {
    if (typeof xml === 'string' && xml.startsWith('<row')) rowsXml.push(xml);
    return write(xml);
  };
  writeRows(sheet);
  sheet.commit();
  await book.commit();
  return { file: Buffer.concat(chunks), rowsXml };
}

/** Every cell as a reader sees it: value, type and number format. */
async function cells(file: Buffer) {
  const book = new ExcelJS.Workbook();
  await book.xlsx.load(file as unknown as ArrayBuffer);
  const seen: unknown[] = [];
  book.worksheets[0]?.eachRow({ includeEmpty: true }, (row, number) => {
    row.eachCell({ includeEmpty: true }, (cell) => {
      seen.push([number, cell.address, cell.type, cell.value, cell.numFmt ?? null]);
    });
  });
  return seen;
}

describe('sheetRowWriter', () => {
  it('is available with the installed exceljs and writes the cells its own addRow writes', async () => {
    let available = false;
    const direct = await workbook((sheet) => {
      const writer = sheetRowWriter(sheet, 3, PLAIN);
      available = writer !== undefined;
      if (!writer) return;
      for (const values of rows) {
        const suffix = String(writer.nextRow);
        const types = [ExcelJS.ValueType.String, ExcelJS.ValueType.Number, ExcelJS.ValueType.Date];
        writer.write(
          values.map((value, index): CellModel => {
            const address = `${writer.letters[index]}${suffix}`;
            const style = index === 2 ? DATE_STYLE : PLAIN;
            return value === null
              ? { address, type: ExcelJS.ValueType.Null, style }
              : { address, type: types[index] as ExcelJS.ValueType, value, style };
          }),
        );
      }
    });
    const viaRows = await workbook((sheet) => {
      for (const values of rows) {
        const row = sheet.addRow(values);
        row.eachCell({ includeEmpty: true }, (cell, column) => {
          cell.style = column === 3 ? DATE_STYLE : PLAIN;
        });
        row.commit();
      }
    });
    expect(available).toBe(true);
    // Each data row's XML, byte for byte as exceljs' own addRow path writes it.
    expect(direct.rowsXml).toHaveLength(rows.length - 1);
    expect(direct.rowsXml).toEqual(viaRows.rowsXml);
    expect(direct.rowsXml[0]).toContain('<v>first &lt;&amp;&gt; &quot;row&quot;</v>');
    const written = await cells(direct.file);
    expect(written).toEqual(await cells(viaRows.file));
    expect(written).toContainEqual([2, 'A2', ExcelJS.ValueType.String, 'first <&> "row"', null]);
    expect(written).toContainEqual([5, 'C5', ExcelJS.ValueType.Date, rows[3]?.[2], DATE_STYLE.numFmt]);
    expect(written).toContainEqual([4, 'C4', ExcelJS.ValueType.Null, null, DATE_STYLE.numFmt]);
  });

  it('columns past Z get two letters', async () => {
    await workbook((sheet) => {
      const writer = sheetRowWriter(sheet, 28, PLAIN);
      expect(writer?.letters.slice(24)).toEqual(['Y', 'Z', 'AA', 'AB']);
    });
  });
});
