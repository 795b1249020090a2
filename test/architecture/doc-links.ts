import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import GithubSlugger from 'github-slugger';
import MarkdownIt from 'markdown-it';
import type { Token } from 'markdown-it';

/**
 * Reads Markdown the way GitHub renders it, to check that every relative link points at a file
 * that exists and every `#anchor` at a heading the target has. markdown-it does the parsing (so a
 * link inside a code span or a fenced block is not a link, and reference-style links resolve as
 * CommonMark says); github-slugger makes the anchors with GitHub's own rules (lower case, spaces
 * to `-`, punctuation dropped except `-` and `_`, `-1`, `-2` … for a repeated heading).
 */

const md = new MarkdownIt({ html: true, linkify: false });

export interface Link {
  href: string;
  /** 1-based line of the block the link is in. */
  line: number;
}

export interface BrokenLink extends Link {
  file: string;
  problem: string;
}

const HTML_ATTR = (name: string) => new RegExp(`\\s${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)')`, 'gi');

function htmlAttrs(html: string, name: string): string[] {
  return [...html.matchAll(HTML_ATTR(name))].map((m) => m[1] ?? m[2] ?? '');
}

/**
 * A heading's text as GitHub slugs it: the rendered text, with code spans' content and no markup.
 */
function headingText(inline: Token): string {
  return (inline.children ?? [])
    .map((c) => (c.type === 'text' || c.type === 'code_inline' ? c.content : ''))
    .join('');
}

/** The anchors a Markdown document offers: its headings' slugs, and any HTML `id` or `name`. */
export function anchorsOf(markdown: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  const tokens = md.parse(markdown, {});
  tokens.forEach((tok, i) => {
    if (tok.type === 'heading_open') anchors.add(slugger.slug(headingText(tokens[i + 1]!)));
    const html =
      tok.type === 'html_block'
        ? [tok.content]
        : (tok.children ?? []).filter((c) => c.type === 'html_inline').map((c) => c.content);
    for (const h of html)
      for (const a of [...htmlAttrs(h, 'id'), ...htmlAttrs(h, 'name')]) anchors.add(a);
  });
  return anchors;
}

/** Every link a Markdown document makes: inline and reference links, images, and HTML href/src. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const tok of md.parse(markdown, {})) {
    const line = (tok.map?.[0] ?? 0) + 1;
    if (tok.type === 'html_block') {
      for (const href of [...htmlAttrs(tok.content, 'href'), ...htmlAttrs(tok.content, 'src')])
        links.push({ href, line });
    }
    for (const c of tok.children ?? []) {
      if (c.type === 'link_open') links.push({ href: String(c.attrGet('href') ?? ''), line });
      else if (c.type === 'image') links.push({ href: String(c.attrGet('src') ?? ''), line });
      else if (c.type === 'html_inline') {
        for (const href of [...htmlAttrs(c.content, 'href'), ...htmlAttrs(c.content, 'src')])
          links.push({ href, line });
      }
    }
  }
  return links;
}

const decode = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/**
 * What is wrong with each relative link of `files` (paths relative to `root`): a target that does
 * not exist or lies outside `root`, or an anchor the target Markdown file has no heading for.
 * Links with a scheme (https:, mailto:) or protocol-relative ones are not followed.
 */
export function brokenLinks(root: string, files: readonly string[]): BrokenLink[] {
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (abs: string) => {
    let a = anchors.get(abs);
    if (!a) {
      a = anchorsOf(readFileSync(abs, 'utf8'));
      anchors.set(abs, a);
    }
    return a;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const abs = path.join(root, file);
    for (const link of linksOf(readFileSync(abs, 'utf8'))) {
      const { href } = link;
      if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith('//')) continue;
      const hash = href.indexOf('#');
      const target = (hash < 0 ? href : href.slice(0, hash)).replace(/\?.*$/, '');
      const anchor = hash < 0 ? undefined : decode(href.slice(hash + 1));
      const to =
        target === ''
          ? abs
          : target.startsWith('/')
            ? path.join(root, decode(target))
            : path.resolve(path.dirname(abs), decode(target));
      const rel = path.relative(root, to);
      if (rel.startsWith('..') || path.isAbsolute(rel)) {
        broken.push({ file, ...link, problem: 'points outside the repository' });
      } else if (!existsSync(to)) {
        broken.push({ file, ...link, problem: `${rel} does not exist` });
      } else if (
        anchor !== undefined &&
        anchor !== '' &&
        statSync(to).isFile() &&
        to.endsWith('.md') &&
        !anchorsIn(to).has(anchor)
      ) {
        broken.push({ file, ...link, problem: `${rel} has no heading with the anchor #${anchor}` });
      }
    }
  }
  return broken;
}

/** Every Markdown file of the repository that git tracks or would track (ignored ones left out). */
export function markdownFiles(root: string): string[] {
  const out = execFileSync(
    'git',
    ['ls-files', '--cached', '--others', '--exclude-standard', '-z', '--', '*.md'],
    { cwd: root, encoding: 'utf8' },
  );
  return [...new Set(out.split('\0').filter(Boolean))]
    .filter((f) => existsSync(path.join(root, f)))
    .sort();
}
