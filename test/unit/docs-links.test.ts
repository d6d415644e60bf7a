/**
 * Every relative link of the README, CONTRIBUTING.md and docs/*.md resolves: the file or folder it
 * names exists, and a `#heading` it names is a heading of that page, slugged as GitHub slugs headings
 * (lower case, punctuation dropped, spaces to hyphens, `-1`, `-2`… for repeats). Links to the web are
 * not fetched. A section named in prose rather than linked (`the README's "Security model"`) is a
 * heading of that page too.
 */
import { describe, expect, test } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const PAGES = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The page's lines outside fenced code blocks, with their line numbers. */
function proseLines(markdown: string): { line: string; number: number }[] {
  const out: { line: string; number: number }[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((line, i) => {
    const opening = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && opening !== undefined) fence = opening;
    else if (fence !== undefined && line.trim().startsWith(fence)) fence = undefined;
    else if (fence === undefined) out.push({ line, number: i + 1 });
  });
  return out;
}

/** GitHub's anchor of a heading's text. */
function githubSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text stays, its target goes
    .replace(/<[^>]+>/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page offers: its headings' slugs, repeats numbered as GitHub numbers them. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every Markdown link target of a page outside code (fenced or inline), with its line. */
function linksOf(markdown: string): { target: string; number: number }[] {
  const links: { target: string; number: number }[] = [];
  for (const { line, number } of proseLines(markdown)) {
    const prose = line.replace(/(`+)[\s\S]*?\1/g, '');
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: match[1]!, number });
    }
    const reference = /^\s*\[[^\]]+\]:\s+(\S+)/.exec(prose)?.[1];
    if (reference !== undefined) links.push({ target: reference, number });
  }
  return links;
}

/** What is wrong with one link of `page`, or undefined when it resolves. */
function brokenLink(page: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not checked here
  const hash = target.indexOf('#');
  const file = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const resolved = file === '' ? path.join(ROOT, page) : path.join(ROOT, path.dirname(page), file);
  if (!resolved.startsWith(ROOT)) return `${target}: leaves the repository`;
  if (!existsSync(resolved)) return `${target}: no such file`;
  if (anchor === undefined) return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md'))
    return `${target}: an anchor on a page that is no Markdown`;
  const anchors = anchorsOf(readFileSync(resolved, 'utf8'));
  return anchors.has(anchor) ? undefined : `${target}: no heading with the anchor #${anchor}`;
}

describe("GitHub's heading anchors", () => {
  test.each([
    ['Quick start (your Express app)', 'quick-start-your-express-app'],
    ['`new SubscriptionHub(options?)`', 'new-subscriptionhuboptions'],
    ['Client: `mcp-subscriptions/client`', 'client-mcp-subscriptionsclient'],
    [
      'Stopped readers at scale and load under faults (issue #14)',
      'stopped-readers-at-scale-and-load-under-faults-issue-14',
    ],
    ['Who the caller is', 'who-the-caller-is'],
  ])('%s → #%s', (heading, slug) => {
    expect(githubSlug(heading)).toBe(slug);
  });

  test('a repeated heading gets -1, -2', () => {
    expect([...anchorsOf('# A\n## Figures\n## Figures\n```\n# not a heading\n```\n## Figures\n')]).toEqual([
      'a',
      'figures',
      'figures-1',
      'figures-2',
    ]);
  });
});

describe.each(PAGES)('%s', (page) => {
  test('every relative link resolves to a file and, with #, to a heading of it', () => {
    const markdown = readFileSync(path.join(ROOT, page), 'utf8');
    const broken = linksOf(markdown)
      .map(({ target, number }) => {
        const problem = brokenLink(page, target);
        return problem === undefined ? undefined : `${page}:${number}: ${problem}`;
      })
      .filter((problem) => problem !== undefined);
    expect(broken).toEqual([]);
  });
});

/** Every `<page>'s "<section>"` of a page's prose (README's, or a docs page's), with its line. */
function namedSectionsOf(markdown: string): { page: string; section: string; number: number }[] {
  const named: { page: string; section: string; number: number }[] = [];
  for (const { line, number } of proseLines(markdown)) {
    for (const match of line.matchAll(/\b(README|[a-z-]+\.md)'s ["“]([^"”]+)["”]/g)) {
      named.push({ page: match[1]!, section: match[2]!, number });
    }
  }
  return named;
}

describe('sections named in prose', () => {
  test('a name is found', () => {
    expect(namedSectionsOf(`See the README's "Security model" and api.md's "Options".`)).toEqual([
      { page: 'README', section: 'Security model', number: 1 },
      { page: 'api.md', section: 'Options', number: 1 },
    ]);
  });

  test.each(PAGES)('%s names only sections that exist', (page) => {
    const problems = namedSectionsOf(readFileSync(path.join(ROOT, page), 'utf8'))
      .map(({ page: target, section, number }) => {
        const file = target === 'README' ? path.join(ROOT, 'README.md') : path.join(ROOT, 'docs', target);
        if (!existsSync(file)) return `${page}:${number}: ${target} does not exist`;
        return anchorsOf(readFileSync(file, 'utf8')).has(githubSlug(section))
          ? undefined
          : `${page}:${number}: ${target} has no section "${section}"`;
      })
      .filter((problem) => problem !== undefined);
    expect(problems).toEqual([]);
  });
});
