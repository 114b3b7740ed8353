// CSV in the browser, as RFC 4180 has it: the "My links" page reads a file of
// links to import and writes the file of their results. Pure functions, no DOM.

const FORMULA_START = /^[=+\-@\t\r']/;
const NEEDS_QUOTES = /[",\r\n]/;

/**
 * The records of a CSV text: fields separated by commas, records by CRLF or LF
 * (a lone CR too), a field in double quotes may hold commas, line breaks and
 * doubled quotes. A byte order mark at the start is dropped. Throws an Error
 * naming the line of a quote left open, or of a quote inside an unquoted field
 * (the file is then not what its writer meant, so nothing of it is used).
 */
export function parseCsv(text) {
  const records = [];
  let record = [];
  let field = '';
  let line = 1;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  let quoted = false;
  let quoteLine = 0;
  const endField = () => {
    record.push(field);
    field = '';
  };
  const endRecord = () => {
    endField();
    records.push(record);
    record = [];
  };
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else {
          quoted = false;
          const next = text[i + 1];
          if (next !== undefined && next !== ',' && next !== '\r' && next !== '\n')
            throw new Error(`Line ${line}: a closing quote must end its field (a quote inside a field is written twice: "").`);
        }
      } else {
        if (c === '\n') line++;
        field += c;
      }
    } else if (c === '"') {
      if (field !== '')
        throw new Error(`Line ${line}: a quote inside an unquoted field (enclose the field in quotes and write its quotes twice).`);
      quoted = true;
      quoteLine = line;
    } else if (c === ',') {
      endField();
    } else if (c === '\r' || c === '\n') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRecord();
      line++;
    } else {
      field += c;
    }
  }
  if (quoted) throw new Error(`Line ${quoteLine}: a quoted field is never closed.`);
  // A last line without its line break is a record; the empty text after a final line break is not.
  if (field !== '' || record.length > 0) endRecord();
  return records;
}

/**
 * A cell as written, read back: exports (this service's and spreadsheets')
 * put an apostrophe before a cell that starts like a formula, so one such
 * apostrophe is dropped.
 */
export const unescapeCell = (text) => (/^'[=+\-@\t\r']/.test(text) ? text.slice(1) : text);

/** One record, with its CRLF; a cell that starts like a formula gets a leading apostrophe (no spreadsheet runs it). */
export function csvRow(values) {
  const cells = values.map((value) => {
    let text = value === null || value === undefined ? '' : String(value);
    if (FORMULA_START.test(text)) text = `'${text}`;
    return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  });
  return `${cells.join(',')}\r\n`;
}
