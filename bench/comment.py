"""Cost of rendering a model's review into the PR comment (runner/safe_markdown.py).

A 20,000-character review (the per-message cap) made of headings, a table, code blocks,
links and images in and outside the repository, mentions and raw HTML, rendered 50 times:
milliseconds per render and output size; then a 200,000-character message, which is cut.

Measures the comment renderer directly (runner.safe_markdown): no public API gives it.

    .venv/bin/python bench/comment.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.safe_markdown import render  # noqa: E402

BLOCK = """## Finding {i}

| File | Line | Problem |
|---|---|---|
| `src/app_{i}.py` | {i} | off by one, see [code](https://github.com/octo/widgets/blob/main/a.py) |

Ping @octocat and @octo/team; <img src=x onerror=alert({i})> [x](https://evil.example/{i})
![p](https://evil.example/{i}.png) and https://evil.example/bare/{i}

```python
def f_{i}(x):
    return x + {i}
```

"""


def review(size: int) -> str:
    text, i = "", 0
    while len(text) < size:
        text += BLOCK.format(i=i)
        i += 1
    return text[:size]


def main() -> None:
    text = review(20_000)
    runs = 50
    start = time.perf_counter()
    for _ in range(runs):
        out = render(text, server_url="https://github.com", repository="octo/widgets")
    per = (time.perf_counter() - start) / runs * 1000
    print(f"20,000-char review: {per:.1f} ms per render, {len(out):,} chars of HTML")
    start = time.perf_counter()
    out = render(review(200_000), server_url="https://github.com", repository="octo/widgets")
    print(
        f"200,000-char message (cut at 20,000): {(time.perf_counter() - start) * 1000:.1f} "
        f"ms, {len(out):,} chars of HTML"
    )


if __name__ == "__main__":
    main()
