"""`bankml tokenize -m MODEL [--no-special] [--add-special] TEXT`: the token ids of TEXT as {"tokens": [...]},
what llama-server's POST /tokenize answers for {"content": TEXT} (parse_special on, add_special off by default).

MODEL is a GGUF path or the name of a pulled model (`bankml pull --list`); TEXT "-" reads standard input."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tokenize", help="print the token ids of a text ({\"tokens\": [...]})",
                              description=__doc__)
    p.add_argument("-m", "--model", required=True, help="GGUF file, or the name of a pulled model")
    p.add_argument("--no-special", action="store_true",
                   help="do not turn the text of control tokens into those tokens (parse_special off)")
    p.add_argument("--add-special", action="store_true", help="add BOS/EOS as the model asks (add_special on)")
    p.add_argument("--pieces", action="store_true", help="print each token's piece too, as /tokenize with_pieces")
    p.add_argument("text", help='the text ("-" reads standard input)')
    p.set_defaults(func=_run)


def _model_file(model: str) -> Path:
    p = Path(model)
    if p.exists() or p.suffix == ".gguf" or "/" in model:
        return p
    from ..models.pull import model_path
    return model_path(model)


def _run(args) -> int:
    from ..cli import EXIT_OK, EXIT_REFUSED, EXIT_TRUNCATED, EXIT_UNREADABLE, _err
    from ..errors import BankmlError, GGUFTruncated
    from ..models.gguf import read_header_file
    from . import Tokenizer

    text = sys.stdin.buffer.read() if args.text == "-" else args.text
    try:
        path = _model_file(args.model)
        tok = Tokenizer.from_gguf(read_header_file(path))
        ids = tok.tokenize(text, add_special=args.add_special, parse_special=not args.no_special)
    except OSError as e:
        _err(f"tokenize: {args.model}: cannot read: {e.strerror or e}")
        return EXIT_UNREADABLE
    except GGUFTruncated as e:
        _err(f"tokenize: {args.model}: {e}")
        return EXIT_TRUNCATED
    except BankmlError as e:
        _err(f"tokenize: {args.model}: {e}")
        return EXIT_REFUSED
    if args.pieces:
        from ..server.api.tokenize import tokenize_body
        # the ids as a /tokenize content array: pieces as llama-server gives them (bytes arrays where not UTF-8)
        print(json.dumps(tokenize_body(tok, {"content": ids, "with_pieces": True}), ensure_ascii=False))
    else:
        print(json.dumps({"tokens": ids}))
    return EXIT_OK
