#!/usr/bin/env python3
"""Checks every relative link of the built user guide (docs/guide/book, HTML): the file it
names exists, and an #anchor names an id on that page. Links to other sites are not
followed (the tests send no traffic off the host). Exit 1 naming each broken link.

Usage: scripts/guide_links.py [BOOK_DIR]
"""
import html.parser
import pathlib
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/guide/book").resolve()
    pages = {}
    for path in root.rglob("*.html"):
        p = Page()
        p.feed(path.read_text(errors="replace"))
        pages[path] = p
    if not pages:
        print(f"guide_links: no pages under {root}", file=sys.stderr)
        return 1
    broken = []
    for path, page in sorted(pages.items()):
        for href in page.links:
            url = urllib.parse.urlsplit(href)
            if url.scheme or url.netloc or href.startswith("javascript:"):
                continue
            target = path if not url.path else (path.parent / urllib.parse.unquote(url.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(root)}: {href}: no such file")
                continue
            frag = urllib.parse.unquote(url.fragment)
            if frag and target in pages and frag not in pages[target].ids:
                broken.append(f"{path.relative_to(root)}: {href}: no id '{frag}'")
    # print.html repeats every page with rewritten links: report each link once.
    for line in sorted(set(broken)):
        print(f"broken link: {line}", file=sys.stderr)
    print(f"guide_links: {len(pages)} pages, {sum(len(p.links) for p in pages.values())} links, "
          f"{len(set(broken))} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
