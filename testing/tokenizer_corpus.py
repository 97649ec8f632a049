"""The tokenizer oracle's corpus: texts generated deterministically from a seed.

    from testing.tokenizer_corpus import corpus, byte_corpus
    texts = corpus()          # list[str], valid Unicode (no lone surrogates): what JSON can carry to llama-server
    raw = byte_corpus()       # list[bytes], invalid UTF-8 and encoded surrogates: for libllama directly

Families: English prose, code, digits of every length, whitespace runs, many scripts, emoji sequences,
combining marks, control characters, special-token text inside prose, very long words, random Unicode, and
random mixtures of all of these. The generator only uses Python's `random.Random(seed)`, so the same seed gives
the same corpus on every machine.
"""

from __future__ import annotations

import random

SEED = 20261129

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world",
    " Hello world",
    "Hello World!",
    "Hello, world! How are you doing today?",
    "I can't believe it's not butter; we'll see, they've said, you're right, I'd go, I'm here.",
    "DON'T SHOUT. I'M LISTENING. WE'LL SEE. THEY'VE GONE. YOU'RE LATE. HE'D KNOW.",
    "It's 5 o'clock somewhere — isn't it?",
    "She said: \"Let's go!\" and he replied, 'Fine.'",
    "Mr. Smith paid $1,234.56 for 3.5 kg of apples on 2024-01-15 at 10:30 a.m.",
    "e.g., i.e., etc., vs. and so on...",
    "What?! No way!!! Really??? Yes.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer",
    "The rain in Spain stays mainly in the plain.",
    "Email me at john.doe+test@example.com or visit https://www.example.org/path?q=1&r=2#frag.",
    "A man , a plan , a canal : Panama !",
    "Don ' t split ' this ' wrongly .",
    "rock 'n' roll, fish 'n' chips, 'twas the night",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
    "camelCaseWord snake_case_word kebab-case-word PascalCaseWord SCREAMING_SNAKE",
    "He said 's 't 're 've 'm 'll 'd and 'S 'T 'RE 'VE 'M 'LL 'D",
    "tab\tseparated\tvalues\there",
    "line one\nline two\r\nline three\rline four",
    "   leading spaces and trailing spaces   ",
    "Multiple     spaces     between     words",
    "What's the weather like? It's sunny, 25°C, with a 10% chance of rain.",
    "Version 2.0.1-beta+build.123 released on 12/31/2023.",
    "The ratio was 3:1, i.e. 75% vs 25%.",
    "(parenthetical) [bracketed] {braced} <angled>",
    "Q: What is 2+2? A: 4.",
    "Ellipsis… em—dash en–dash “curly quotes” ‘single’ «guillemets» ‹single›",
]

WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had by "
         "word but not what all were we when your can said there use an each which she do how their if will up "
         "other about out many then them these so some her would make like him into time has look two more write "
         "go see number no way could people my than first water been call who oil its now find long down day did "
         "get come made may part over new sound take only little work know place year live me back give most very "
         "after thing our just name good sentence man think say great where help through much before line right "
         "too mean old any same tell boy follow came want show also around form three small set put end does "
         "another well large must big even such because turn here why ask went men read need land different home "
         "us move try kind hand picture again change off play spell air away animal house point page letter "
         "mother answer found study still learn should America world tokenizer llama server quantization "
         "don't can't won't it's I'm you're we'll they've she'd").split()

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "const x = arr.map((v) => v ** 2).filter(v => v % 2 === 0);",
    "{\"name\": \"bankml\", \"version\": \"0.1.0\", \"tags\": [\"a\", \"b\"], \"n\": null, \"ok\": true}",
    "<html><head><title>Test</title></head><body><div class=\"x\">Hi</div></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;",
    "$ ls -la | grep '\\.py$' && echo \"done\" > /dev/null 2>&1",
    "x = [i**2 for i in range(10) if i % 3 == 0]  # comment\n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![1, 2, 3];\n    Ok(())\n}",
    "    \n        indented\n    \t\tmixed indentation\n",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;",
    "if (a && b || !c) { return a != b ? a : b; } else if (x <= y >= z) {}",
    "@decorator\nclass Foo(Bar, metaclass=Meta):\n    __slots__ = ('a',)\n",
    "```python\nprint('hello')\n```",
    "# Title\n\n## Subtitle\n\n- item 1\n- item 2\n\n1. first\n2. second\n\n**bold** *italic* `code`",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "0x1F 0b1010 0o777 1e-10 3.14159f 1_000_000 -42 +7",
    "path/to/file.txt C:\\Windows\\System32 ~/.config/app.yaml ../../up",
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><root attr='v'>&amp;&lt;&gt;&#x27;</root>",
    "key: value\nlist:\n  - a\n  - b\nnested:\n  k: v\n",
    "std::vector<std::pair<int, std::string>> v; v.emplace_back(1, \"x\");",
    "lambda x: x if x else None; print(*args, **kwargs)",
    "\\begin{equation} E = mc^2 \\end{equation} $\\alpha + \\beta_{i}^{2}$",
]

SCRIPTS = [
    "Äpfel Öl Übermaß straße Ärger", "café naïve résumé façade coöperate piñata jalapeño", "Ångström Øresund Æsir",
    "Zażółć gęślą jaźń", "Příliš žluťoučký kůň úpěl ďábelské ódy", "Şişli ığdır İstanbul ÇĞŞÖÜ",
    "Tiếng Việt có dấu: Đường phố Hà Nội", "ʻōlelo Hawaiʻi", "ŒUVRE œuvre ﬁ ﬂ ﬀ ß ẞ", "ǅ ǈ ǋ ǲ Dž",
    "Ελληνικά: Καλημέρα κόσμε, ΑΒΓΔ αβγδ ς ΐ ΰ", "Русский: Съешь же ещё этих мягких французских булок",
    "Українська: Ґанок, їжак, єнот", "Български: нещо на Български", "Српски: Љубав Његош Ђорђе",
    "العربية: مرحبا بالعالم، كيف حالك؟ ٠١٢٣٤٥٦٧٨٩", "فارسی: سلام دنیا ۱۲۳۴", "اردو: ہیلو دنیا",
    "עברית: שלום עולם, מה שלומך?", "हिन्दी: नमस्ते दुनिया, क्या हाल है? ०१२३४५६७८९", "मराठी: क्षत्रिय ज्ञान",
    "বাংলা: হ্যালো বিশ্ব ০১২৩", "ਪੰਜਾਬੀ: ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "ગુજરાતી: નમસ્તે", "தமிழ்: வணக்கம் உலகம்",
    "తెలుగు: హలో ప్రపంచం", "ಕನ್ನಡ: ನಮಸ್ಕಾರ", "മലയാളം: ഹലോ വേൾഡ്", "සිංහල: ආයුබෝවන්", "ไทย: สวัสดีชาวโลก ๑๒๓",
    "ລາວ: ສະບາຍດີ", "ខ្មែរ: សួស្តីពិភពលោក", "မြန်မာ: မင်္ဂလာပါ", "ქართული: გამარჯობა", "Հայերեն: Բարեւ աշխարհ",
    "አማርኛ: ሰላም ለዓለም", "ᏣᎳᎩ: ᎣᏏᏲ", "ᠮᠣᠩᠭᠣᠯ: ᠰᠠᠶᠢᠨ", "བོད་ཡིག: བཀྲ་ཤིས་བདེ་ལེགས།", "ᐃᓄᒃᑎᑐᑦ: ᐊᐃᓐᖓᐃ",
    "中文: 你好，世界！我们今天去哪里？", "繁體中文: 臺灣 電腦 學習", "日本語: こんにちは世界、カタカナとひらがな。",
    "半角ｶﾀｶﾅ ﾃｽﾄ", "한국어: 안녕하세요 세계! 한글 ㄱㄴㄷ ᄀᄁᄂ", "𠀀𠀁𪜀 𝕳𝖊𝖑𝖑𝖔 𝓦𝓸𝓻𝓵𝓭 𝟘𝟙𝟚",
    "Runes: ᚠᚢᚦᚨᚱᚲ Ogham: ᚁᚂᚃ Gothic: 𐌰𐌱𐌲", "Math: ∀x∈ℝ, ∃y: x²+y²≤1 ⇒ √(x)∫∑∏∂∇ ≠ ≈ ∞",
    "Fullwidth: ＡＢＣ１２３！？", "Superscripts: x² y³ z⁴ ₁₂₃ ½ ¼ ¾ Ⅻ ⅷ ⑳",
    "Currency: $ € £ ¥ ₹ ₽ ₿ ¢ ₩ ₪", "Arrows: ← → ↑ ↓ ↔ ⇐ ⇒ ⟶", "Box: ┌─┐│└─┘ ░▒▓█",
]

EMOJI = [
    "😀", "👍", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🏳️‍🌈", "🏴‍☠️", "🇫🇷🇺🇸🇯🇵", "🇬🇧", "1️⃣2️⃣#️⃣",
    "🏴󠁧󠁢󠁥󠁮󠁧󠁿", "❤️", "❤", "☺️", "🦙.cpp", "🤖💬🔥✨🎉", "🧑🏽‍💻", "👩🏾‍🚀", "🫠🫶🪿", "©️ ®️ ™️", "🀄🃏",
]

COMBINING = [
    "e\u0301 a\u0300 o\u0308 n\u0303 c\u0327", "Z\u0335\u0321\u0322a\u0336\u0328l\u0337g\u0334o\u0338",
    "\u0301\u0302\u0303 leading marks", "क्षि ग्रं", "\u1100\u1161\u11a8 jamo", "ア\u3099 か\u309a",
    "q\u0307\u0323 A\u030a", "ثَلَاثَة", "שָׁלוֹם", "\u0e01\u0e34\u0e4a", "a\u20dd b\u20e3",
]

CONTROL = [chr(c) for c in range(0, 32)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xa0)] + [
    "\ufeff", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\u2060", "\u2066",
    "\ufffd", "\ufffe", "\uffff", "\U0010ffff", "\U000e0001", "\ue000", "\U000f0000",
]

WHITESPACE = [" ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u1680", "\u2000", "\u2003",
              "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]

SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>", "<filename>",
    "<gh_stars>", "<issue_start>", "<jupyter_code>", "<empty_output>", "<fim_prefix>", "<fim_middle>",
    "<fim_suffix>", "<fim_pad>",
    "<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[multimodal]", "<start_of_turn>", "<end_of_turn>",
    "<unused0>", "<unused17>", "<unused6241>", "<start_of_image>", "<end_of_image>", "<table>", "</table>",
    "<b>", "</b>", "<s>", "</s>", "<code>", "<h1>", "<blockquote>", "<a>", "<img>", "<bbox>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<|eom_id|>", "<|reserved_special_token_0|>", "<|reserved_special_token_250|>", "<|python_tag|>",
    "[PAD151646]", "[PAD151935]", "<|fim_prefix|>", "<|vision_start|>", "<|endofprompt|>",
    "<|end|>", "<|user|>", "<|assistant|>", "<|system|>", "<|placeholder1|>", "[INST]", "[/INST]",
    "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<BOS_TOKEN>",
    "<|padding|>", "<|im_sta", "im_end|>", "<|", "|>", "<<|im_start|>|>", "<|im_start|><|im_start|>",
]


def _digits(rnd: random.Random) -> list[str]:
    out = []
    for n in range(1, 65):
        out.append("".join(rnd.choice("0123456789") for _ in range(n)))
    for n in (100, 150, 257):
        out.append("".join(rnd.choice("0123456789") for _ in range(n)))
    out += ["1234567890" * 3, "3.14159265358979", "-0.001", "1,000,000", "1 000 000", "12:34:56", "2024-02-29",
            "+1 (555) 123-4567", "v1.2.3", "0.1+0.2=0.30000000000000004", "١٢٣ ٤٥٦", "१२३४", "１２３４５",
            "²³¹", "½⅓¼", "ⅠⅡⅢⅣ", "𝟏𝟐𝟑", "১২৩", "௧௨௩", "๑๒๓", "Ⅻ12", "x1y22z333w4444", "a1b2c3", "1a2b3c"]
    for _ in range(40):
        out.append(" ".join("".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 12)))
                            for _ in range(rnd.randint(1, 6))))
    return out


def _whitespace(rnd: random.Random) -> list[str]:
    out = []
    for ch in (" ", "\t", "\n", "\r\n", "\u00a0", "\u3000"):
        for n in (1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 40):
            out.append(ch * n)
            out.append("a" + ch * n + "b")
            out.append(ch * n + "word")
            out.append("word" + ch * n)
    for _ in range(80):
        out.append("".join(rnd.choice(WHITESPACE) for _ in range(rnd.randint(1, 12))))
        out.append(rnd.choice(WORDS) + "".join(rnd.choice(WHITESPACE) for _ in range(rnd.randint(1, 6)))
                   + rnd.choice(WORDS))
    return out


def _special_prose(rnd: random.Random) -> list[str]:
    out = []
    for s in SPECIALS:
        out += [s, " " + s, s + " ", f"Hello {s} world", f"a{s}b", f"{s}\n", f"\n{s}\n", f"  {s}  ", s + s,
                f"text\t{s}\tmore"]
    for _ in range(150):
        parts = []
        for _ in range(rnd.randint(2, 8)):
            r = rnd.random()
            if r < 0.4:
                parts.append(rnd.choice(SPECIALS))
            elif r < 0.8:
                parts.append(" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 5))))
            else:
                parts.append(rnd.choice(WHITESPACE) * rnd.randint(1, 4))
        out.append(rnd.choice(["", " ", "\n"]).join(parts))
    return out


def _long_words(rnd: random.Random) -> list[str]:
    out = ["a" * 1000, "ab" * 300, "supercalifragilisticexpialidocious" * 20,
           "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(600)),
           "".join(rnd.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") for _ in range(800)),
           "".join(rnd.choice("0123456789abcdef") for _ in range(512)), "!" * 300, "-" * 200 + ">",
           "=" * 120, "😀" * 100, "ж" * 400, "你" * 300, "한" * 200, "ก" * 250, "é" * 300, "\u0301" * 64,
           "https://example.com/" + "/".join(rnd.choice(WORDS) for _ in range(60)),
           "Pneumonoultramicroscopicsilicovolcanoconiosis", "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz"]
    return out


def _random_unicode(rnd: random.Random, n: int) -> list[str]:
    blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x52f), (0x590, 0x6ff), (0x900, 0xdff), (0xe00, 0xeff),
              (0x1000, 0x10ff), (0x1100, 0x11ff), (0x1e00, 0x1fff), (0x2000, 0x2bff), (0x3000, 0x30ff),
              (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xe000, 0xf8ff), (0xf900, 0xffef), (0x10000, 0x1ffff),
              (0x1f300, 0x1faff), (0x20000, 0x2ffff), (0xe0000, 0xe007f), (0xf0000, 0x10ffff), (0, 0x10ffff)]
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rnd.randint(1, 40)):
            a, b = rnd.choice(blocks)
            c = rnd.randint(a, b)
            if 0xD800 <= c <= 0xDFFF:
                c = 0xFFFD
            chars.append(chr(c))
        out.append("".join(chars))
    return out


def _mixtures(rnd: random.Random, n: int) -> list[str]:
    pools = [ENGLISH, WORDS, CODE, SCRIPTS, EMOJI, COMBINING, CONTROL, WHITESPACE, SPECIALS]
    out = []
    for _ in range(n):
        parts = [rnd.choice(rnd.choice(pools)) for _ in range(rnd.randint(1, 10))]
        sep = rnd.choice(["", " ", "\n", "  ", "\t", ", "])
        s = sep.join(parts)
        if rnd.random() < 0.3:
            s = s.upper() if rnd.random() < 0.5 else s.swapcase()
        out.append(s)
    return out


def corpus(seed: int = SEED) -> list[str]:
    """Texts for the tokenizer oracle (about 2,500; all valid Unicode, no lone surrogates)."""
    rnd = random.Random(seed)
    out: list[str] = [""]
    out += ENGLISH + CODE + SCRIPTS + EMOJI + COMBINING + CONTROL + WHITESPACE
    out += [" " + s for s in ENGLISH[:10]] + [s + "\n" for s in SCRIPTS[::3]]
    out += [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 30))) for _ in range(250)]
    out += [" ".join(rnd.choice(WORDS).capitalize() if rnd.random() < .3 else rnd.choice(WORDS)
                     for _ in range(rnd.randint(1, 20))) + rnd.choice([".", "!", "?", "...", ""]) for _ in range(100)]
    out += _digits(rnd) + _whitespace(rnd) + _special_prose(rnd) + _long_words(rnd)
    out += [rnd.choice(EMOJI) * rnd.randint(1, 5) + rnd.choice(["", " ", "a", "\n"]) + rnd.choice(EMOJI)
            for _ in range(60)]
    out += _random_unicode(rnd, 250) + _mixtures(rnd, 450)
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


def byte_corpus(seed: int = SEED) -> list[bytes]:
    """Byte strings that are not valid UTF-8, or that encode surrogates or overlong forms (libllama only:
    llama-server's JSON parser refuses them). Codepoints above U+10FFFF are left out: llama.cpp's BPE throws
    on them (and the exception would cross the C API)."""
    rnd = random.Random(seed + 1)
    fixed = [b"\x80", b"\xbf", b"\xc0", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
             b"\xf0\x9f\x98(", b"\xff", b"\xfe\xff", b"\xf8\x88\x80\x80\x80", b"\xc0\x80", b"\xe0\x80\x80",
             b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80", b"a\xffb", b"Hello \x80world",
             b"\xe4\xbd\xa0\xe5", b"<|im_start|>\xff<|im_end|>", b"\xc3\xa9\xcc", b" \xf0\x9f", b"\xf0\x9f\x98\x80\x80",
             b"abc\xed\xa0\x80def", b"\xef\xbb\xbf\xff\xfe"]
    out = list(fixed)
    for _ in range(120):
        n = rnd.randint(1, 30)
        b = bytearray()
        for _ in range(n):
            r = rnd.random()
            if r < 0.4:
                b += rnd.choice(ENGLISH + SCRIPTS + EMOJI).encode()[: rnd.randint(1, 12)]
            elif r < 0.7:
                b.append(rnd.randrange(0x80, 0x100))
            else:
                b.append(rnd.randrange(0x20, 0x7f))
        out.append(bytes(_strip_high_codepoints(bytes(b))))
    return out


def _strip_high_codepoints(b: bytes) -> bytes:
    # drop 4-byte forms that would decode (llama.cpp's way) above U+10FFFF, until none is left
    while True:
        s = _strip_once(b)
        if s == b:
            return s
        b = s


def _strip_once(b: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(b):
        c = b[i]
        if 0xF0 <= c <= 0xF7 and i + 3 < len(b) and all(0x80 <= x < 0xC0 for x in b[i + 1:i + 4]):
            cp = ((c & 7) << 18) | ((b[i + 1] & 63) << 12) | ((b[i + 2] & 63) << 6) | (b[i + 3] & 63)
            if cp > 0x10FFFF:
                i += 4
                continue
        out.append(c)
        i += 1
    return bytes(out)
