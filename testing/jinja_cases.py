"""Snippets that probe llama.cpp b11192's Jinja engine one feature at a time.

They are joined into one template (`probe_template()`): the variable `case`, passed with chat_template_kwargs,
picks the snippet, so one llama-server answers them all through /apply-template. `DATA` holds the other
variables every request carries. A snippet must parse (a parse error stops the server from starting); a
runtime error is fine: its text is part of what is recorded.
"""

from __future__ import annotations

DATA = {
    "n": 3, "neg": -7, "f": 2.5, "big": 9007199254740993, "s": "Hello World", "u": "héllo wörld ✓",
    "xs": [3, 1, 2], "strs": ["b", "a", "c"], "d": {"b": 2, "a": 1, "c": None}, "nul": None, "t": True,
    "objs": [{"name": "x", "age": 3, "tag": "k"}, {"name": "y", "age": 1}, {"name": "z", "age": 3, "tag": "m"}],
    "nested": {"l": [1, {"k": [True, None, 1.25]}], "e": {}, "ea": []},
    "fl": [0.1, 1.0, 1e20, 1e-7, -0.0, 123456.789, 1.5e300], "ws": "  pad me \t\n",
    "ctrl": "tab\tnl\ncr\r\"q\" \\ \u0001 \u007f", "mixed": [1, "a", True, None, 2.5],
    "num_strs": ["10", "9", "100"], "nums": [10, 9.5, -1],
}

SNIPPETS: list[tuple[str, str]] = [
    # printing values
    ("print-scalars", "{{ 1 }}|{{ -2 }}|{{ 1.5 }}|{{ 1.0 }}|{{ 0.1 + 0.2 }}|{{ true }}|{{ false }}|{{ none }}|"
                      "{{ undefined_thing }}|{{ 'str' }}"),
    ("print-containers", "{{ [1, 'a', none, [2, 3], true] }}|{{ {'a': 1} }}|{{ (1, 2) }}|{{ [] }}|{{ xs }}|{{ d }}"),
    ("print-floats", "{% for x in fl %}{{ x }};{% endfor %}"),
    ("print-big", "{{ big }}|{{ big + 0 }}|{{ big * 1 }}|{{ 2 * 3 }}|{{ 2 * 1.5 }}|{{ 10 - 20 }}"),
    ("arith", "{{ 7 / 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7.5 % 2 }}|{{ 6 / 3 }}|{{ 1 / 0 }}|{{ -1 / 0 }}|{{ f * 2 }}"),
    ("arith-mod0", "{{ 5 % 0 }}"),
    ("arith-neg", "{{ -n }}|{{ -f }}|{{ +n }}|{{ -n|abs }}|{{ neg|abs }}|{{ f|abs }}|{{ 2 - -1 }}"),
    ("concat", "{{ 'a' ~ 1 ~ true }}|{{ 'a' + 'b' }}|{{ 'x' ~ 1 + 2 }}|{{ 'p' ~ none }}|{{ none ~ 'q' }}|"
               "{{ 'r' + undefined_thing }}|{{ 'l' ~ [1, 2] }}|{{ 'o' ~ d }}"),
    ("concat-num", "{{ 1 ~ 2 }}"),
    ("concat-undef", "{{ undefined_thing ~ undefined_thing }}"),
    ("repeat", "{{ 'ab' * 3 }}|{{ 2 * 'cd' }}|{{ 'x' * 0 }}|{{ 'y' * -1 }}"),
    ("list-concat", "{{ [1] + [2, 3] }}|{{ (xs + strs) | length }}"),
    ("compare", "{{ 1 < 2 }}|{{ 2 <= 2 }}|{{ 3 > 4 }}|{{ 1.5 >= 1 }}|{{ 1 == 1.0 }}|{{ 1 == true }}|{{ 'a' == 'a' }}|"
                "{{ [1] == [1] }}|{{ [[1]] == [[1]] }}|{{ {'a': 1} == {'a': 1} }}|{{ none == none }}|"
                "{{ none == undefined_thing }}|{{ 1 != '1' }}|{{ (1, 2) == [1, 2] }}"),
    ("compare-strings", "{{ 'a' < 'b' }}"),
    ("compare-none", "{{ none < 1 }}"),
    ("logic", "{{ 1 and 2 }}|{{ 0 and 2 }}|{{ 0 or 'x' }}|{{ '' or [] }}|{{ not 0 }}|{{ not 1 == 2 }}|"
              "{{ none or 'dflt' }}|{{ xs and xs[0] }}"),
    ("membership", "{{ 1 in xs }}|{{ 5 not in xs }}|{{ 'ell' in s }}|{{ 'b' in d }}|{{ 'zz' in d }}|{{ none in [none] }}|"
                   "{{ 1 in undefined_thing }}|{{ 1 not in undefined_thing }}|{{ 'a' in strs }}|{{ 3.0 in xs }}"),
    ("membership-bad", "{{ 1 in 'abc' }}"),
    ("ternary", "{{ 'y' if t else 'n' }}|{{ 'y' if nul else 'n' }}|[{{ 'only' if false }}]|{{ 1 if 0 else 2 if 0 else 3 }}"),
    ("precedence", "{{ 2 + 3 * 4 }}|{{ (2 + 3) * 4 }}|{{ 10 - 2 - 3 }}|{{ 2 * 3 is odd }}|{{ 1 + 2 is even }}|"
                   "{{ -3|abs + 1 }}|{{ not 1 in [1] }}|{{ 1 < 2 == true }}"),
    # strings
    ("str-case", "{{ s|upper }}|{{ s|lower }}|{{ 'hELLO wORLD'|title }}|{{ 'hELLO wORLD'|capitalize }}|{{ u|upper }}|"
                 "{{ s.upper() }}|{{ s.lower() }}"),
    ("str-parts", "{{ ('ab' ~ 'cd')|capitalize }}|{{ ('hello ' ~ 'world')|title }}|{{ ('x' ~ s)|upper }}|"
                  "{{ ('ab cd' ~ 'ef')|title }}"),
    ("str-strip", "[{{ ws|trim }}][{{ ws|strip }}][{{ ws.strip() }}][{{ ws.lstrip() }}][{{ ws.rstrip() }}]"
                  "[{{ 'xxaxx'.strip('x') }}][{{ 'xxaxx'|trim('x') }}][{{ 'abcab'.lstrip('ab') }}]"),
    ("str-split", "{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|"
                  "{{ 'a,b,c'.rsplit(',', 1) }}|{{ ''.split(',') }}|{{ s.split(' ')[1] }}"),
    ("str-split-empty", "{{ 'abc'.split('') }}"),
    ("str-replace", "{{ s|replace('o', '0') }}|{{ s.replace('World', 'There') }}|{{ 'ab'|replace('', '-') }}|"
                    "{{ 'aaa'|replace('a', 'aa') }}|{{ 123|replace('2', 'x') }}"),
    ("str-replace-count", "{{ 'aaa'|replace('a', 'b', 2) }}"),
    ("str-startswith", "{{ s.startswith('Hell') }}|{{ s.endswith('ld') }}|{{ s.startswith('x') }}|{{ ''.endswith('') }}"),
    ("str-length", "{{ s|length }}|{{ u|length }}|{{ u|count }}|{{ ''|length }}|{{ s[0] }}|{{ s[-1] }}|{{ s[100] }}|"
                   "[{{ u[1] }}]"),
    ("str-slice", "{{ s[1:4] }}|{{ s[:5] }}|{{ s[6:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[-5:] }}|{{ s[1:-1] }}"),
    ("str-format", "{{ '{} and {}'.format('a', 1) }}|{{ 'x{}y'|format(s) }}|{{ '%s'|format(1) }}|{{ 'no {}'.format() }}"),
    ("str-format-bad", "{{ '{0}'.format(1) }}"),
    ("str-int", "{{ '12abc'|int }}|{{ ' 7'|int }}|{{ 'abc'|int }}|{{ 'abc'|int(5) }}|{{ '0x1f'|int(base=16) }}|"
                "{{ '0x1f'|int(0, 0) }}|{{ '-9'|int }}|{{ '99999999999'|int }}|{{ 3.9|int }}|{{ true|int }}"),
    ("str-float", "{{ '1.5e3'|float }}|{{ ' -2.25x'|float }}|{{ 'abc'|float }}|{{ 'inf'|float }}|{{ '1e999'|float }}|"
                  "{{ 'abc'|float(1.5) }}|{{ 3|float }}|{{ 2.5|float }}|{{ '.5'|float }}"),
    ("str-indent", "[{{ 'a\nb\n\nc'|indent }}][{{ 'a\nb'|indent(2, true) }}][{{ 'a\n\nb\n'|indent(3, blank=true) }}]"
                   "[{{ '\nx'|indent(1) }}][{{ 'a\nb'|indent('>> ') }}]"),
    ("str-misc", "{{ s|string }}|{{ s|safe }}|{{ s|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|"
                 "{{ s|tojson }}|{{ u|tojson }}|{{ ctrl|tojson }}|{{ u|tojson(ensure_ascii=true) }}"),
    ("str-join-method", "{{ ', '.join(strs) }}"),
    ("str-escape", "{{ '<a>'|e }}"),
    ("str-wordcount", "{{ s|wordcount }}"),
    ("str-literals", "{{ 'it\\'s' }}|{{ \"dq\" }}|{{ 'a' 'b' \"c\" }}|{{ 'tab\\there' }}|{{ 'nl\\nx' }}"),
    # numbers
    ("num-filters", "{{ f|int }}|{{ n|float }}|{{ n|string }}|{{ f|string }}|{{ 100000000000000000000.0|string }}|{{ n|tojson }}|"
                    "{{ f|round }}"),
    ("num-default", "{{ n|default(5) }}|{{ nul|default(5) }}|{{ undefined_thing|default(5) }}|{{ 0|default(5, true) }}|"
                    "{{ undefined_thing|d('d') }}"),
    ("num-default-noarg", "{{ n|default }}"),
    ("bool-filters", "{{ t|string }}|{{ t|int }}|{{ t|float }}|{{ t|tojson }}|{{ false|safe }}"),
    ("none-filters", "{{ nul|string }}|{{ nul|tojson }}|{{ nul|items }}|{{ nul|safe }}|{{ nul|default('x') }}"),
    # tests
    ("tests", "{{ n is odd }}|{{ n is even }}|{{ 6 is divisibleby(3) }}|{{ n is number }}|{{ f is float }}|"
              "{{ n is integer }}|{{ s is string }}|{{ xs is iterable }}|{{ s is sequence }}|{{ d is mapping }}|"
              "{{ xs is mapping }}|{{ nul is none }}|{{ nul is defined }}|{{ qq is defined }}|{{ qq is undefined }}|"
              "{{ t is boolean }}|{{ t is true }}|{{ 1 is true }}|{{ false is false }}|{{ range is callable }}|"
              "{{ 'abc' is lower }}|{{ 'ABC' is upper }}|{{ 'aBc' is lower }}|{{ 3 is eq(3) }}|{{ 3 is ne(4) }}|"
              "{{ 3 is gt(2) }}|{{ 'a' is lt('b') }}|{{ 2 is in(xs) }}|{{ 'odd' is test }}|{{ 'nope' is test }}|"
              "{{ n is not odd }}|{{ '1' is eq(1) }}|{{ qq is iterable }}"),
    ("test-unknown", "{{ n is prime }}"),
    ("test-odd-float", "{{ f is odd }}"),
    ("test-bool-gt", "{{ true is gt(false) }}"),
    # arrays
    ("arr-basic", "{{ xs|length }}|{{ xs|first }}|{{ xs|last }}|{{ xs[0] }}|{{ xs[-1] }}|{{ xs[9] }}|{{ []|first }}|"
                  "{{ xs|list }}|{{ xs|reverse }}|{{ xs|sort }}|{{ xs|sort(reverse=true) }}|{{ strs|sort }}|"
                  "{{ xs|min }}|{{ xs|max }}|{{ []|max }}|{{ num_strs|sort }}|{{ nums|sort }}|{{ mixed|length }}"),
    ("arr-slice", "{{ xs[1:] }}|{{ xs[:2] }}|{{ xs[::-1] }}|{{ xs[-2:] }}|{{ xs[::2] }}|{{ xs[5:] }}|{{ xs[1:2:0] }}"),
    ("arr-join", "{{ xs|join(',') }}|{{ strs|join }}|{{ objs|join(', ', attribute='name') }}|{{ [1.5, 2]|join('-') }}|"
                 "{{ [[1, 2], [3, 4]]|join(';', attribute=1) }}"),
    ("arr-join-bad", "{{ [true, 1]|join(',') }}"),
    ("arr-map", "{{ objs|map(attribute='name')|list }}|{{ objs|map(attribute='tag', default='-')|join }}|"
                "{{ [[1, 2], [3]]|map(attribute=1)|list }}"),
    ("arr-map-filter", "{{ strs|map('upper')|list }}"),
    ("arr-select", "{{ objs|selectattr('tag')|map(attribute='name')|join }}|"
                   "{{ objs|rejectattr('tag')|map(attribute='name')|join }}|"
                   "{{ objs|selectattr('age', 'equalto', 3)|length }}|{{ objs|selectattr('age', 'gt', 1)|length }}|"
                   "{{ xs|select('odd')|list }}"),
    ("arr-select3", "{{ xs|select('gt', 1)|list }}|{{ xs|reject('eq', 1)|list }}"),
    ("arr-sort-attr", "{{ objs|sort(attribute='age')|map(attribute='name')|join }}|"
                      "{{ objs|sort(attribute='age', reverse=true)|map(attribute='name')|join }}|"
                      "{{ [[2, 'b'], [1, 'a']]|sort(attribute=0) }}"),
    ("arr-methods", "{% set l = [1] %}{{ l.append(2) }}|{{ l }}|{{ l.pop() }}|{{ l }}|{{ [1, 2, 3].pop(0) }}|"
                    "{{ xs.index is defined }}"),
    ("arr-pop-empty", "{{ [].pop() }}"),
    ("arr-tuple-append", "{{ (1, 2).append(3) }}"),
    ("arr-misc", "{{ xs|tojson }}|{{ xs|string }}|{{ mixed|tojson }}|{{ [1, [2, [3]]]|tojson(indent=2) }}|"
                 "{{ xs|default(5) }}|{{ xs is sequence }}|{{ range(3)|list }}|{{ range(1, 6, 2)|list }}|"
                 "{{ range(5, 0, -2)|list }}|{{ range(0)|list }}"),
    ("arr-unique", "{{ xs|unique }}"),
    ("range-zero", "{{ range(1, 2, 0) }}"),
    # objects
    ("obj-basic", "{{ d.b }}|{{ d['a'] }}|{{ d.zz }}|[{{ d.c }}]|{{ d|length }}|{{ d.keys()|list }}|{{ d.values()|list }}|"
                  "{{ d.items()|list }}|{{ d.get('a') }}|{{ d.get('zz', 'dflt') }}|{{ d.get('zz') }}|{{ d|tojson }}|"
                  "{{ d|string }}|{{ d|dictsort }}|{{ d|items|list }}"),
    ("obj-items-key", "{% set o = {'items': 5, 'k': 1} %}{{ o.items is callable }}|{{ o['items'] }}|{{ o.k }}"),
    ("obj-dictsort", "{% for k, v in d|dictsort %}{{ k }}={{ v }};{% endfor %}|"
                     "{% for k, v in {'b': 1, 'a': 2}|dictsort(by='value') %}{{ k }};{% endfor %}|"
                     "{% for k in {'b': 1, 'a': 2}|dictsort(reverse=true) %}{{ k }};{% endfor %}"),
    ("obj-default", "{{ d|default('x') }}"),
    ("obj-tojson", "{{ nested|tojson }}|{{ nested|tojson(indent=2) }}|{{ nested|tojson(indent=0) }}|"
                   "{{ d|tojson(separators=[',', ':']) }}|{{ tojson(nested, true) }}|{{ objs[0]|tojson }}"),
    ("obj-tojson-sort", "{{ d|tojson(sort_keys=true) }}"),
    ("obj-literal-keys", "{{ {1: 'a', 1.0: 'b', true: 'c'} }}|{{ {'x': 1, 'x': 2} }}|{{ {none: 1} }}"),
    ("obj-literal-badkey", "{{ {[1]: 2} }}"),
    # member access edge cases
    ("member-edges", "{{ xs.length }}|{{ s.length }}|{{ nul.foo }}|{{ undefined_thing.foo.bar }}|{{ n.foo }}|"
                     "[{{ xs['0'] }}]|{{ d['a'] is defined }}|{{ messages[0].role }}|{{ messages[0]['content'] }}"),
    ("member-float-index", "{{ xs[1.5] }}"),
    ("call-undefined", "{{ undefined_thing() }}"),
    ("call-non-function", "{{ n() }}"),
    ("method-unknown", "{{ s.nosuchmethod() }}"),
    ("filter-unknown", "{{ s|nosuchfilter }}"),
    # loops
    ("loop-vars", "{% for x in strs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                  "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}"),
    ("loop-else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in xs %}{{ x }}{% else %}no{% endfor %}|"
                  "{% for x in undefined_thing %}u{% else %}undef{% endfor %}"),
    ("loop-filter", "{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }};{% endfor %}"),
    ("loop-dict", "{% for k in d %}{{ k }};{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|"
                  "{% for k, v in d %}{{ k }}:{{ v }};{% endfor %}"),
    ("loop-break", "{% for x in xs %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% endfor %}|"
                   "{% for x in xs %}a{% if true %}b{% continue %}{% endif %}c{% endfor %}|"
                   "{% for x in [1, 2] %}{% break %}{% else %}else-after-break{% endfor %}|"
                   "{% for x in [1, 2] %}{% continue %}{% else %}else-after-continue{% endfor %}"),
    ("loop-scope", "{% set v = 'outer' %}{% for x in xs %}{% set v = x %}{{ v }}{% endfor %}|{{ v }}|"
                   "{% set ns = namespace(c=0) %}{% for x in xs %}{% set ns.c = ns.c + x %}{% endfor %}{{ ns.c }}|"
                   "{% for x in [1, 2, 3] %}{% if loop.first %}{% set w = 'w' %}{% endif %}{{ w }}{% endfor %}"),
    ("loop-nested", "{% for a in [1, 2] %}{% for b in ['x', 'y'] %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}"
                    "{{ loop.index }};{% endfor %}"),
    ("loop-unpack", "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }};{% endfor %}"),
    ("loop-unpack-bad", "{% for a, b in [[1, 2, 3]] %}x{% endfor %}"),
    ("loop-string", "{% for c in 'abc' %}{{ c }}{% endfor %}"),
    ("loop-cycle", "{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}"),
    # set
    ("set-forms", "{% set a, b = [1, 2] %}{{ a }}{{ b }}|{% set blk %}inner {{ n }}{% endset %}[{{ blk }}]|"
                  "{% set t2 = (1, 'x') %}{{ t2 }}"),
    ("set-unpack-bad", "{% set a, b = [1] %}"),
    ("set-member-bad", "{% set n.x = 1 %}"),
    ("namespace", "{% set ns = namespace(a=1, b='x') %}{{ ns.a }}{{ ns.b }}|{% set ns.a = 5 %}{{ ns.a }}|{{ ns }}"),
    ("namespace-positional", "{{ namespace(1) }}"),
    # macros and call blocks
    ("macro-basic", "{% macro m(a, b='B', c=3) %}[{{ a }}|{{ b }}|{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}"
                    "{{ m(1, c=9) }}{{ m(b=7) }}{{ m(1, 2, 3, 4) }}"),
    ("macro-scope", "{% set g = 'global' %}{% macro show() %}{{ g }}/{{ local_v }}{% endmacro %}"
                    "{% set local_v = 'caller' %}{{ show() }}|{% for local_v in ['loop'] %}{{ show() }}{% endfor %}"),
    ("macro-recursive", "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k }}*{{ fact(k - 1) }}{% endif %}{% endmacro %}"
                        "{{ fact(5) }}"),
    ("macro-missing-arg", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m() }}"),
    ("macro-caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                     "{% call wrap('b') %}inside {{ n }}{% endcall %}|"
                     "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}"
                     "{% call(item) each(xs) %}({{ item }}){% endcall %}"),
    ("filter-block", "{% filter upper %}shout {{ s }}{% endfilter %}|{% filter replace('a', 'o') %}banana{% endfilter %}"),
    ("generation-tags", "a{% generation %}b{% endgeneration %}c"),
    # whitespace control
    ("ws-trim", "A {{- ' b ' -}} C|A\n  {%- if true -%}\n  B\n  {%- endif -%}\nC|[ {# comment #} ]|[ {#- c -#} ]"),
    ("ws-blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz"),
    ("ws-expr-newline", "{{ 'a' }}\n{{ 'b' }}\n{% if true %}\nc{% endif %}\n\nd"),
    ("ws-lstrip-tabs", "p\n\t \t{% if true %}q{% endif %}\n   {{ 'r' }}"),
    ("ws-comment-newline", "s{# c #}\nt{#- c #}\n u"),
    # raising and errors
    ("raise", "{{ raise_exception('custom failure: ' ~ n) }}"),
    ("raise-in-loop", "{% for m in messages %}{% if m.role == 'user' %}{{ raise_exception('no users') }}{% endif %}"
                      "{% endfor %}"),
    ("error-unary", "{{ -s }}"),
    ("error-pos-multiline", "line1\n{% set q = 1 %}\n  {{ [1, 2].nope() }}"),
    ("error-strip-type", "{{ n.strip() }}"),
    ("error-dict-attr-call", "{{ d.b() }}"),
    ("error-int-ensure", "{{ 'x'.startswith(1) }}"),
    ("error-get-key", "{{ d.get(1) }}"),
    ("error-slice-step", "{{ xs[::0] }}"),
    # misc builtins
    ("strftime", "{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %B %j') }}"),
    ("strftime-empty", "{{ strftime_now('') }}"),
    ("strftime-long", "{{ strftime_now('%Y' * 30) }}"),
    ("globals", "{{ true }}{{ True }}{{ false }}{{ False }}{{ none }}{{ None }}|{{ bos_token }}|{{ eos_token }}|"
                "{{ add_generation_prompt }}|{{ enable_thinking }}|{{ messages|length }}|{{ tools is defined }}|"
                "{{ preserve_thinking }}|{{ clear_thinking }}|{{ reasoning_effort is defined }}|{{ date_string is defined }}"),
    ("shadow-builtins", "{% set true = 0 %}{{ true }}|{% set range = 5 %}{{ range }}|{% set none = 'N' %}{{ none }}"),
    ("tojson-global", "{{ tojson(xs) }}|{{ tojson(xs, false, 2) }}|{{ tojson(d, indent=1) }}"),
    ("messages-tojson", "{{ messages|tojson }}"),
    ("loop-over-messages", "{% for m in messages %}<{{ m.role }}:{{ m.content }}>{% endfor %}"),
]


def probe_template() -> str:
    """One template holding every snippet, selected by `case`; anything else renders the last message."""
    out = []
    for i, (name, body) in enumerate(SNIPPETS):
        out.append(("{% if case == '" if i == 0 else "{% elif case == '") + name + "' %}" + body)
    out.append("{% else %}{{ messages[-1]['content'] if messages else '' }}{% endif %}")
    return "".join(out)


def probe_bodies() -> list[dict]:
    bodies = []
    for name, _ in SNIPPETS:
        kwargs = dict(DATA)
        kwargs["case"] = name
        bodies.append({"_id": len(bodies), "_kind": name,
                       "messages": [{"role": "user", "content": "probe " + name}], "chat_template_kwargs": kwargs})
    return bodies
