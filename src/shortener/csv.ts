// CSV as RFC 4180 writes it (comma-separated, CRLF line ends, a field holding a comma, a double
// quote or a line break enclosed in double quotes with its double quotes doubled), with a defence
// against CSV injection: a spreadsheet runs a cell that starts with = + - @ (or a tab or carriage
// return, which some strip first) as a formula, so such a cell gets a leading apostrophe, which
// spreadsheets read as "text" and do not show. A cell that starts with an apostrophe gets one
// too, so reading a file back is always "drop one leading apostrophe when there is one".

const FORMULA_START = /^[=+\-@\t\r']/;
const NEEDS_QUOTES = /[",\r\n]/;

export type CsvValue = string | number | boolean | null;

export function csvCell(value: CsvValue): string {
  let text = value === null ? '' : String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** One record, with its CRLF. */
export const csvRow = (values: CsvValue[]): string => `${values.map(csvCell).join(',')}\r\n`;
