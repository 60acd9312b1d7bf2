/**
 * The input rows of a statement that serves a batch (store/coalesce.ts), as a FROM item: one item
 * as a VALUES row, several as unnest() of one array parameter per column, numbered by `n` in both.
 * One row is the common case on an idle node, and VALUES tells the planner so: the prepared
 * statement then settles on a generic plan, where unnest() of an array of unknown length kept
 * PostgreSQL planning it afresh on every run.
 */
export interface BatchRows {
  /** `… AS alias(columns…, n)` */
  from: string;
  params: unknown[];
}

export function batchRows(alias: string, columns: Array<[name: string, type: string, values: unknown[]]>, firstParam = 1): BatchRows {
  const count = columns[0]?.[2].length ?? 0;
  const names = [...columns.map(([name]) => name), 'n'].join(', ');
  const at = (index: number) => `$${firstParam + index}`;
  if (count === 1) {
    const row = columns.map(([, type], index) => `${at(index)}::${type}`).join(', ');
    return { from: `(VALUES (${row}, 1::bigint)) AS ${alias}(${names})`, params: columns.map(([, , values]) => values[0]) };
  }
  const arrays = columns.map(([, type], index) => `${at(index)}::${type}[]`).join(', ');
  return { from: `unnest(${arrays}) WITH ORDINALITY AS ${alias}(${names})`, params: columns.map(([, , values]) => values) };
}
