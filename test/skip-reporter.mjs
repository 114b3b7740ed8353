// Runs beside the usual reporter of `npm test`: at the end, every skipped test or suite with the
// reason it gave, so a skip is never only a count in the summary. Plain JavaScript: node loads
// reporters before any loader (tsx) is in place.

/** @param {AsyncIterable<{ type: string; data: { name?: string; file?: string; skip?: string | boolean } }>} source */
export default async function* skipReporter(source) {
  const skipped = [];
  for await (const { type, data } of source) {
    if ((type === 'test:pass' || type === 'test:fail') && data.skip !== undefined && data.skip !== false) {
      const where = data.file ? `${data.file.replace(`${process.cwd()}/`, '')}: ` : '';
      skipped.push(`${where}${data.name}: ${typeof data.skip === 'string' ? data.skip : 'NO REASON GIVEN'}`);
    }
  }
  if (skipped.length > 0) yield `# what was skipped, and why:\n${skipped.map((s) => `#   ${s}\n`).join('')}`;
}
