"""chat_sources.py — question -> answer material from what a Debian machine already has.

Each extractor yields Entry(source, subject, questions, answer, followups): the subject is
the word, command or function the question is about (the evaluation checks that the answer
mentions it), questions are phrasings to draw from, answer is the reference text cut to a
few sentences, followups are optional (question, answer) pairs about the same subject.

  devil        Ambrose Bierce's Devil's Dictionary (dict-devil, public domain)
  jargon       the Jargon File (dict-jargon, public domain)
  man          NAME + first DESCRIPTION paragraph + SYNOPSIS of every man1/man8 page
               (package and licence of each page recorded from dpkg and its copyright file)
  python       Python 3.11 library reference: function/method/class entries (python3.11-doc, PSF-2.0)
  python-faq   the Python FAQ's questions and first answer paragraphs (python3.11-doc, PSF-2.0)
  python-glossary  the Python glossary (python3.11-doc, PSF-2.0)
"""
import glob
import gzip
import os
import re
from dataclasses import dataclass, field

MAX_ANSWER_CHARS = 200


@dataclass
class Entry:
    source: str
    subject: str           # what the question is about; "" when there is no single subject
    questions: list
    answer: str
    followups: list = field(default_factory=list)
    package: str = ""


def squash(text):
    return re.sub(r"\s+", " ", text).strip()


def cut(text, limit=MAX_ANSWER_CHARS):
    """At most `limit` characters, ending at a sentence end when one is in reach."""
    text = squash(text)
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in re.finditer(r"[.!?](\s|$)", head)]
    if ends and ends[-1] > limit // 3:
        return head[:ends[-1]].strip()
    return head[:head.rfind(" ")].rstrip(",;:") + " ..."


# ---- dictd dictionaries ---------------------------------------------------------------
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(s):
    n = 0
    for ch in s:
        n = n * 64 + B64.index(ch)
    return n


def dict_entries(name):
    with gzip.open(f"/usr/share/dictd/{name}.dict.dz", "rb") as f:
        data = f.read()
    with open(f"/usr/share/dictd/{name}.index", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0].startswith("00database"):
                continue
            off, ln = b64(parts[1]), b64(parts[2])
            yield parts[0], data[off:off + ln].decode("utf-8", errors="replace")


def devil():
    for head, text in dict_entries("devil"):
        m = re.match(r"\s*([A-Z][A-Z' .-]*[A-Z]),\s*([a-z]+\.(?:\s*and\s*[a-z]+\.)?)\s+(.*)", text, re.S)
        if not m:
            continue
        word = m.group(1).strip().capitalize() if " " not in m.group(1) else m.group(1).strip().title()
        pos = m.group(2)
        body = m.group(3).split("\n\n")[0]                # the definition, not the verse after it
        body = re.sub(r"[{}]", "", body)
        if len(squash(body)) < 8:
            continue
        w = word.lower()
        qs = [f"What is {art(w)} {w}?", f"Define {w}.", f"What does \"{w}\" mean?",
              f"What does the Devil's Dictionary say about {w}?", f"Give me a definition of {w}."]
        yield Entry("devil", word, qs, cut(f"{word} ({pos}): {squash(body)}"), package="dict-devil")


def art(w):
    return "an" if w[:1].lower() in "aeiou" else "a"


def jargon():
    for head, text in dict_entries("jargon"):
        lines = text.split("\n")
        if len(lines) < 3:
            continue
        term = lines[0].strip()
        m = re.match(r"\s*(?:/[^/]*/,?\s*)?((?:[a-z]+\.\s*,?\s*)+)", lines[1])
        pos = m.group(1).strip().rstrip(",") if m else ""
        paras = [squash(p) for p in "\n".join(lines[2:]).split("\n\n") if p.strip()]
        if not paras or not term or len(term) > 40:
            continue
        body = paras[0]
        body = re.sub(r"^\d+\.\s*", "", body)
        body = re.sub(r"^\[[^\]]*\]\s*", "", body)       # usage tags like [common]
        body = re.sub(r"[{}]", "", body)
        if len(body) < 20 or body.startswith("See "):
            continue
        qs = [f"What does \"{term}\" mean in hacker jargon?", f"What is {term}?",
              f"In the Jargon File, what is {term}?", f"Explain the jargon term \"{term}\".",
              f"What do hackers mean by \"{term}\"?"]
        ans = f"{term}{f' ({pos})' if pos else ''}: {body}"
        yield Entry("jargon", term, qs, cut(ans), package="dict-jargon")


# ---- man pages ------------------------------------------------------------------------
ROFF_ESCAPES = [(r"\\f\(..", ""), (r"\\f\[[^\]]*\]", ""), (r"\\f.", ""), (r"\\\*\(..", ""),
                (r"\\\*\[[^\]]*\]", ""), (r"\\\*.", ""), (r"\\\(aq", "'"), (r"\\\((lq|rq|dq)", '"'),
                (r"\\\((oq|cq)", "'"), (r"\\\((em|en)", "-"), (r"\\\(bu", "*"), (r"\\\(co", "(c)"),
                (r"\\\(..", ""), (r"\\\[[^\]]*\]", ""), (r"\\[-]", "-"), (r"\\e", "\\\\"),
                (r"\\[&,/|^%]", ""), (r"\\ ", " "), (r"\\0", " "), (r"\\s[-+]?\d", ""),
                (r"\\c", ""), (r"\\$", "")]


def deroff(line):
    for pat, rep in ROFF_ESCAPES:
        line = re.sub(pat, rep, line)
    return line


MDOC_DROP = {"Nm", "Fl", "Ar", "Op", "Oo", "Oc", "Pa", "Em", "Sy", "Li", "Cm", "Dq", "Qq", "Ql",
             "Ns", "Sq", "Pq", "Ic", "Ev", "Va", "Dv", "Er", "Ad", "Ms", "Tn", "Ux", "Bq", "Aq",
             "No", "Xo", "Xc", "Ao", "Ac", "Do", "Dc", "Qo", "Qc", "So", "Sc", "Po", "Pc", "An",
             "Lk", "Mt"}


def man_text_line(line, mdoc):
    """The plain text of one roff/mdoc source line ("" for pure requests)."""
    if line.startswith(('.\\"', "'\\\"")):
        return ""
    if line.startswith("."):
        parts = line[1:].split(None, 1)
        if not parts:
            return ""
        macro, rest = parts[0], parts[1] if len(parts) > 1 else ""
        if mdoc:
            if macro == "Xr":
                w = rest.split()
                return f"{w[0]}({w[1]})" if len(w) >= 2 else rest
            if macro in MDOC_DROP or macro in ("Nd",):
                words = [w for w in rest.split() if w not in MDOC_DROP]
                if macro == "Fl":
                    return " ".join("-" + w if i == 0 else w for i, w in enumerate(words))
                return " ".join(words)
            return ""
        if macro in ("B", "I", "SM", "SB"):
            return rest.replace('"', "")
        if macro in ("BR", "RB", "IR", "RI", "BI", "IB"):
            return "".join(re.findall(r'"[^"]*"|\S+', rest)).replace('"', "")
        return ""
    return line


def parse_man(text):
    mdoc = "\n.Sh " in text or text.startswith(".Sh ")
    sections, cur = {}, None
    for raw in text.split("\n"):
        m = re.match(r"\.(SH|Sh)\s+\"?([^\"]*)\"?", raw)
        if m:
            cur = m.group(2).strip().upper()
            sections[cur] = []
            continue
        if cur is not None:
            sections[cur].append(raw)
    name = sections.get("NAME")
    desc = sections.get("DESCRIPTION")
    if not name or not desc:
        return None
    if mdoc:
        nd = [ln for ln in name if ln.startswith(".Nd")]
        if not nd:
            return None
        what = deroff(nd[0][3:].strip())
    else:
        line = deroff(" ".join(ln for ln in name if not ln.startswith(".")))
        if " - " not in line:
            return None
        what = line.split(" - ", 1)[1].strip()
    para, paras = [], []
    for raw in desc:
        if re.match(r"\.(PP|P|LP|Pp|sp|TP|IP|Bl|It|HP|RS|nf|Bd|EX)\b", raw):
            if para:
                paras.append(" ".join(para))
                para = []
            if re.match(r"\.(TP|IP|Bl|It|HP|RS|nf|Bd|EX)\b", raw) and paras:
                break                                      # lists and examples: stop
            continue
        t = deroff(man_text_line(raw, mdoc)).strip()
        if t:
            para.append(t)
    if para:
        paras.append(" ".join(para))
    body = squash(" ".join(paras[:2]))
    syn = []
    for raw in sections.get("SYNOPSIS", []):
        if re.match(r"\.(PP|P|LP|Pp|br|sp|TP|IP)\b", raw) and syn:
            break
        t = deroff(man_text_line(raw, mdoc)).strip()
        if t:
            syn.append(t)
    return squash(what), body, squash(" ".join(syn))


def dpkg_owners(pattern):
    """file path -> Debian package, from /var/lib/dpkg/info/*.list."""
    owners = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for line in f:
                if pattern in line:
                    owners[line.strip()] = pkg
    return owners


def package_licence(pkg, cache={}):
    """The first License: field of the package's machine-readable copyright file."""
    if pkg in cache:
        return cache[pkg]
    lic = "see /usr/share/doc/%s/copyright" % pkg
    path = f"/usr/share/doc/{pkg}/copyright"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("License:"):
                    lic = line.split(":", 1)[1].strip() or lic
                    break
    except OSError:
        pass
    cache[pkg] = lic
    return lic


MAX_PAGES_PER_PACKAGE = 120  # keeps a few huge packages (google-cloud-cli: ~10 k pages) from dominating


def man():
    owners = dpkg_owners("/usr/share/man/man")
    seen, per_package = set(), {}
    for sec in ("1", "8"):
        for path in sorted(glob.glob(f"/usr/share/man/man{sec}/*.gz")):
            m = re.match(r"(.+)\.%s[a-z]*\.gz$" % sec, os.path.basename(path))
            if not m or os.path.islink(path):
                continue
            cmd = m.group(1)
            if cmd in seen or cmd.startswith(("x86_64-linux-gnu-", "perl5")) or \
                    not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", cmd):
                continue
            try:
                with gzip.open(path, "rb") as f:
                    text = f.read().decode("utf-8", errors="replace")
            except OSError:
                continue
            if text.startswith(".so "):
                continue
            parsed = parse_man(text)
            if not parsed:
                continue
            what, body, syn = parsed
            if not what or "\\" in what + body or len(body) < 30 or len(what) > 120:
                continue
            pkg = owners.get(path, "")
            if per_package.get(pkg, 0) >= MAX_PAGES_PER_PACKAGE:
                continue
            per_package[pkg] = per_package.get(pkg, 0) + 1
            seen.add(cmd)
            qs = [f"What does the {cmd} command do?", f"What is {cmd}?",
                  f"What does `{cmd}` do?", f"Explain the {cmd} command.",
                  f"What is the {cmd} command used for?", f"Tell me about {cmd}."]
            ans = cut(f"`{cmd}` - {what}. {body}")
            fups = []
            if syn and "\\" not in syn and len(syn) <= 160 and cmd in syn:
                fups.append(("How do I run it?", f"Usage: {syn}"))
                fups.append(("What is its syntax?", f"Usage: {syn}"))
            yield Entry("man", cmd, qs, ans, fups, package=pkg)


# ---- Python documentation ---------------------------------------------------------------
PY_SRC = "/usr/share/doc/python3.11/html/_sources"


def rst_clean(text):
    text = re.sub(r":[a-z:]+:`~?([^`<]*?)\s*<[^>]*>`", r"\1", text)    # :role:`title <target>`
    text = re.sub(r":[a-z:]+:`~?([^`]*)`", lambda m: "`" + m.group(1).split(".")[-1]
                  if m.group(0).startswith((":func:`~", ":meth:`~", ":class:`~")) else
                  "`" + m.group(1) + "`", text)
    text = re.sub(r"`([^`]*)`", lambda m: "`" + m.group(1).rstrip("`") + "`", text)
    text = text.replace("``", "`")
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"\*([^*\s][^*]*)\*", r"\1", text)
    text = re.sub(r"`([^`<]+) <https?://[^>]+>`_+", r"\1", text)
    return squash(text)


def python_library():
    for path in sorted(glob.glob(PY_SRC + "/library/*.rst.txt")):
        lines = open(path, encoding="utf-8").read().split("\n")
        module, cls = "", ""
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"\.\. (?:module|currentmodule):: (\S+)", line)
            if m:
                module, cls = m.group(1), ""
            m = re.match(r"(\s*)\.\. (function|method|class|classmethod|staticmethod):: (.+)", line)
            if not m:
                i += 1
                continue
            indent, kind, sig = len(m.group(1)), m.group(2), m.group(3).strip()
            nm = re.match(r"([A-Za-z_][\w.]*)", sig)
            i += 1
            if not nm:
                continue
            name = nm.group(1)
            if kind == "class" and indent == 0:
                cls = name.split(".")[-1]
            if kind in ("method", "classmethod", "staticmethod") and cls and "." not in name:
                name = f"{cls}.{name}"
            body, started = [], False
            j = i
            while j < len(lines):
                ln = lines[j]
                if not ln.strip():
                    if started:
                        break
                    j += 1
                    continue
                lead = len(ln) - len(ln.lstrip())
                if lead <= indent:
                    break
                s = ln.strip()
                if not started and (s.startswith((":", "..")) or re.fullmatch(r"[\w.]+\(.*\)", s)):
                    j += 1
                    continue
                if s.startswith(".."):
                    break
                body.append(s)
                started = True
                j += 1
            text = re.sub(r"::$", ".", rst_clean(" ".join(body)))
            if len(text) < 25 or not module or module.startswith("test"):
                continue
            full = name if name.startswith(module + ".") or kind == "class" and "." in name \
                else f"{module}.{name}"
            parts = full.split(".")
            full = ".".join(p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1])
            short = full.rsplit(".", 1)[-1]
            call = full + ("()" if kind != "class" else "")
            qs = [f"What does `{call}` do in Python?", f"How do I use {call} in Python?",
                  f"What is {full} in Python?", f"Explain Python's {full}.",
                  f"In Python, what does {short} in {full.rsplit('.', 1)[0]} do?"]
            args_ = sig[sig.index("("):] if "(" in sig else ""
            sig_clean = full + rst_clean(args_)
            yield Entry("python", full, qs, cut(f"`{sig_clean}`: {text}"),
                        package="python3.11-doc")


def python_faq():
    for path in sorted(glob.glob(PY_SRC + "/faq/*.rst.txt")):
        lines = open(path, encoding="utf-8").read().split("\n")
        for i in range(len(lines) - 2):
            q = lines[i].strip()
            if not q.endswith("?") or not re.fullmatch(r"-+", lines[i + 1].strip() or "x"):
                continue
            paras, cur = [], []
            for ln in lines[i + 2:]:
                if re.fullmatch(r"[-=~^]+", ln.strip()) and cur:
                    cur.pop()
                    break
                if not ln.strip():
                    if cur:
                        paras.append(" ".join(cur))
                        cur = []
                        if len(" ".join(paras)) > 200:
                            break
                    continue
                if ln.startswith((" ", "\t", "..")):
                    if cur:
                        paras.append(" ".join(cur))
                        cur = []
                    if paras:
                        break
                    continue
                cur.append(ln.strip())
            if cur:
                paras.append(" ".join(cur))
            text = rst_clean(" ".join(paras))
            if len(text) < 25 or text.endswith(":"):  # "::" introduces a code block we drop
                continue
            yield Entry("python-faq", "", [rst_clean(q)], cut(text), package="python3.11-doc")


def python_glossary():
    lines = open(PY_SRC + "/glossary.rst.txt", encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"   (\S.*)", lines[i])
        if m and i + 1 < len(lines) and lines[i + 1].startswith("      "):
            term = rst_clean(m.group(1)).strip("`")
            body = []
            j = i + 1
            while j < len(lines) and (lines[j].startswith("      ") or not lines[j].strip()):
                if not lines[j].strip() and body:
                    break
                body.append(lines[j].strip())
                j += 1
            text = rst_clean(" ".join(body))
            if re.fullmatch(r"[\w -]{2,40}", term) and len(text) > 25:
                qs = [f"What is {art(term)} {term} in Python?", f"In Python, what does \"{term}\" mean?",
                      f"Define {term} (Python)."]
                yield Entry("python-glossary", term, qs, cut(f"{term}: {text}"),
                            package="python3.11-doc")
            i = j
        else:
            i += 1


SOURCES = {
    "devil": (devil, "dict-devil", "public domain"),
    "jargon": (jargon, "dict-jargon", "public domain"),
    "man": (man, "the package of each page (training/chat_sources.json)", "per package"),
    "python": (python_library, "python3.11-doc", "PSF-2.0"),
    "python-faq": (python_faq, "python3.11-doc", "PSF-2.0"),
    "python-glossary": (python_glossary, "python3.11-doc", "PSF-2.0"),
}
