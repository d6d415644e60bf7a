/**
 * Prometheus's text exposition format (version 0.0.4, what `GET /metrics` answers), read back the way
 * a scraper reads it: `# HELP`, `# TYPE` and `# UNIT` lines, and one sample per line,
 * `name{label="value",…} value [timestamp]`, label values escaped with `\\`, `\"` and `\n`. A line that
 * is none of these throws, naming it: a test must not pass over output a scraper would reject.
 */

/** One sample line. */
export interface PromSample {
  /** The sample's name as written: `x_total`, or `x_bucket` / `x_sum` / `x_count` of a histogram. */
  readonly name: string;
  /** Its labels, values unescaped. */
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A whole exposition. */
export interface Exposition {
  readonly samples: readonly PromSample[];
  /** `# TYPE` by family name: `counter`, `gauge`, `histogram`, … */
  readonly types: ReadonlyMap<string, string>;
  /** `# UNIT` by family name, where given. */
  readonly units: ReadonlyMap<string, string>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/** A sample value: a Go float (`1`, `-2.5e-3`), `+Inf`, `-Inf` or `NaN`. */
function parseValue(raw: string, line: string): number {
  if (raw === '+Inf' || raw === 'Inf') return Infinity;
  if (raw === '-Inf') return -Infinity;
  if (raw === 'NaN') return Number.NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw)) throw new Error(`not a sample value: ${line}`);
  return Number(raw);
}

/** The labels between `{` and `}` at the start of `rest`; returns them and what follows the `}`. */
function parseLabels(rest: string, line: string): { labels: Record<string, string>; after: string } {
  const labels: Record<string, string> = {};
  let i = 1; // past '{'
  for (;;) {
    if (rest[i] === '}') return { labels, after: rest.slice(i + 1) };
    const name = LABEL_NAME.exec(rest.slice(i))?.[0];
    if (name === undefined || rest[i + name.length] !== '=' || rest[i + name.length + 1] !== '"') {
      throw new Error(`malformed labels: ${line}`);
    }
    if (Object.hasOwn(labels, name)) throw new Error(`label ${name} twice: ${line}`);
    i += name.length + 2;
    let value = '';
    for (;;) {
      const c = rest[i];
      if (c === undefined) throw new Error(`unterminated label value: ${line}`);
      i += 1;
      if (c === '"') break;
      if (c !== '\\') {
        value += c;
        continue;
      }
      const escaped = rest[i];
      i += 1;
      if (escaped === 'n') value += '\n';
      else if (escaped === '\\' || escaped === '"') value += escaped;
      else throw new Error(`bad escape \\${escaped ?? ''} in a label value: ${line}`);
    }
    labels[name] = value;
    if (rest[i] === ',') i += 1;
    else if (rest[i] !== '}') throw new Error(`malformed labels: ${line}`);
  }
}

/** Parses a text exposition; throws on any line a scraper would reject. */
export function parseExposition(text: string): Exposition {
  const samples: PromSample[] = [];
  const types = new Map<string, string>();
  const units = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const meta = /^# (HELP|TYPE|UNIT) ([a-zA-Z_:][a-zA-Z0-9_:]*)(?: (.*))?$/.exec(line);
      if (meta === null) continue; // any other comment
      const [, keyword, family, rest = ''] = meta;
      if (keyword === 'TYPE') {
        if (!/^(counter|gauge|histogram|summary|untyped)$/.test(rest)) throw new Error(`bad TYPE: ${line}`);
        if (types.has(family!)) throw new Error(`TYPE given twice for ${family}: ${line}`);
        types.set(family!, rest);
      } else if (keyword === 'UNIT') {
        units.set(family!, rest);
      }
      continue;
    }
    const name = NAME.exec(line)?.[0];
    if (name === undefined) throw new Error(`not a sample line: ${line}`);
    let rest = line.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, after: rest } = parseLabels(rest, line));
    const fields = rest.trim().split(/\s+/);
    if (!rest.startsWith(' ') || fields.length < 1 || fields.length > 2) throw new Error(`not a sample line: ${line}`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`bad timestamp: ${line}`);
    samples.push({ name, labels, value: parseValue(fields[0]!, line) });
  }
  return { samples, types, units };
}

/** The samples named `name` whose labels include every one of `labels` (others may be there too). */
export function seriesOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): PromSample[] {
  return exposition.samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
}

/**
 * The sum of the samples `seriesOf()` finds: a counter's total over the label values not given. `0` when
 * there is none, as a counter nothing has counted yet is not exported at all.
 */
export function totalOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  return seriesOf(exposition, name, labels).reduce((sum, sample) => sum + sample.value, 0);
}

/** Every label value of the exposition, to look for what must never be in one. */
export function labelValues(exposition: Exposition): string[] {
  return exposition.samples.flatMap((sample) => Object.values(sample.labels));
}

/** What a `GET` of a metrics endpoint answered. */
export interface Scrape {
  readonly status: number;
  readonly contentType: string;
  readonly text: string;
  /** The body parsed ({@link parseExposition}); `undefined` unless the status is 200. */
  readonly exposition: Exposition | undefined;
}

/**
 * `GET url` as a scraper sends it: no `Authorization`, `Accept` as Prometheus's for the text format.
 * A 200 body is parsed, and throws if a scraper would reject it.
 */
export async function scrape(url: string): Promise<Scrape> {
  const response = await fetch(url, { headers: { accept: 'text/plain;version=0.0.4;q=0.9,*/*;q=0.1' } });
  const text = await response.text();
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    text,
    exposition: response.status === 200 ? parseExposition(text) : undefined,
  };
}
