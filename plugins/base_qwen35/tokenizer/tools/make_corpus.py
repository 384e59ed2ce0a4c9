#!/usr/bin/env python3
"""Writes the tokenizer test corpus: one JSON string per line (so that tabs, \\r\\n, trailing spaces
and lone combining marks survive), deterministic (no randomness without a fixed seed).

Usage: python make_corpus.py > ../tests/data/corpus.jsonl
"""
import json
import random
import unicodedata

cases = []


def add(*texts):
    cases.extend(texts)


# English prose, punctuation, quotes.
add("Hello world!", "Hello, world.", "The quick brown fox jumps over the lazy dog.",
    "A small machine runs inside the weights of a language model; nothing is trained.",
    "\"Quoted text,\" she said, 'and single quotes.'", "Semicolons; colons: dashes - and -- em—dashes.",
    "Question? Exclamation!! Interrobang?!", "(parentheses) [brackets] {braces} <angles>",
    "e-mail: someone@example.com, URL: https://example.com/path?q=1&r=2#frag",
    "Ellipsis... and more...", "ALL CAPS SENTENCE WITH WORDS", "MiXeD cAsE wOrDs", "a", "I", " ", "  ", "\n",
    "", "x y z", "word", " word", "  word", "\tword", "word ", "word  ", "word\n", "\nword", "don't stop")
# Contractions in various cases and positions.
add("it's", "It's", "IT'S", "it'S", "we'll", "WE'LL", "We'Ll", "they're", "THEY'RE", "They'Re", "I've", "I'VE",
    "I'm", "I'M", "he'd", "HE'D", "can't", "CAN'T", "'s", "'S", "'ll", "'LL", "'re", "'RE", "'ve", "'m", "'d",
    "'t", "'x", "''s", "'sun", "'Sunday", "rock 'n' roll", "the dogs' bones", "o'clock", "I'd've", "y'all're",
    "'s's's", "' s", "’s curly apostrophe", "it\u2019s", "\u017f long s: '\u017f and '\u017ft",
    "Kelvin \u212a and 'K", "'\u0130 dotted", "'\u0131 dotless", "ﬆ ligature 'ﬆ")
# Code with tabs and indentation.
add("def encode(self, text):\n    ids = []\n    for piece in self.pre_tokenize(text):\n        ids.extend(self.bpe(piece))\n    return ids\n",
    "int main(int argc, char** argv) {\n\tfor (int i = 0; i < argc; ++i) {\n\t\tprintf(\"%s\\n\", argv[i]);\n\t}\n\treturn 0;\n}\n",
    "\t\tindented with two tabs", "\t \t mixed tabs and spaces", "if (x == 1 && y != 2 || z >= 3) { return x->y; }",
    "    four spaces", "        eight spaces\n        and again", "x = [1, 2, 3]  # comment  ",
    "const auto& [a, b] = pair; // structured binding", "#include <vector>\n#include \"local.h\"\n",
    "SELECT * FROM users WHERE id = 42;", "<html><body><p class=\"x\">Hi</p></body></html>",
    "fn main() -> Result<(), Box<dyn Error>> {\n    Ok(())\n}", "λx. x + 1", "a+=b; c-=d; e*=f; g/=h;",
    "__init__ __name__ ___triple", "camelCaseIdentifier snake_case_identifier SCREAMING_CASE",
    "0x1F 0b1010 0o777 1e-10 3.14f 1_000_000", "$HOME ${PATH} %APPDATA% ~/.bashrc",
    "    \n    \n", "\t\n\t\n", "line1\r\nline2\r\nline3", "\r\n", "\r", "\r\r\n\n", " \r\n ", "a\r\n\r\nb",
    "trailing spaces   \nnext", "spaces   between   words", "tabs\t\tbetween\twords", "end with spaces   ",
    "end with tab\t", "end with newline spaces \n  ", "   leading spaces", "\n\n\n", "  \n  \n  x")
# Whitespace runs and Unicode whitespace.
add(" " * 17, "a" + " " * 9 + "b", "\u00a0non-breaking\u00a0space", "ideographic\u3000space", "em\u2003space",
    "line\u2028separator", "para\u2029separator", "next\u0085line", "mongolian\u180evowel separator",
    "zero\u200bwidth space", "narrow\u202fnbsp", "vertical\x0btab and form\x0cfeed", " \u00a0 \u3000 x",
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a", "x \n\n y", "x  \r\n  y")
# Digits and numbers.
add("0", "7", "42", "123456789", "3.14159", "1,000,000", "-273.15", "2024-01-01", "12:34:56", "1e10",
    "v1.2.3", "abc123def", "123abc", "١٢٣ Arabic-Indic digits", "१२३ Devanagari digits", "½ ¾ ² ³ Ⅻ ⅻ",
    "①②③ circled", "ＦＵＬＬ ｗｉｄｔｈ １２３", "route 66", "  99 bottles", "$19.99", "100%", "#1", "x^2 + y^2 = z^2")
# Emoji: single, ZWJ sequences, skin tones, flags, keycaps, variation selectors.
add("🙂", "Hello 👋 world 🌍", "👍🏽", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇺🇸🇯🇵🇩🇪",
    "1️⃣ 2️⃣ #️⃣", "❤️ vs ❤", "🧑🏽‍💻 technologist", "👩‍❤️‍💋‍👨", "🫠🫡🫶", "emoji🙂inside🙂words", "😀😃😄😁😆😅😂🤣")
# CJK.
add("你好，世界！", "我爱自然语言处理。", "日本語のテキストです。", "カタカナとひらがな", "한국어 텍스트입니다.",
    "中文English混合text", "繁體中文測試", "「引用」『二重』", "漢字かな交じり文", "𠀀𠀁 CJK extension B",
    "毕老师！1 + 1 = 2", "東京は2024年に。", "ｶﾀｶﾅ half-width")
# Right-to-left scripts.
add("مرحبا بالعالم", "السلام عليكم ورحمة الله", "العربية: ١٢٣٤", "مَرْحَبًا with harakat", "שלום עולם",
    "עִבְרִית with niqqud", "mixed עברית and English", "فارسی: سلام", "اردو زبان")
# Indic, Thai and other scripts with combining marks.
add("नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय", "संस्कृतम्", "বাংলা ভাষা", "தமிழ் மொழி", "తెలుగు", "ಕನ್ನಡ",
    "മലയാളം", "ગુજરાતી", "ਪੰਜਾਬੀ", "ภาษาไทย", "สวัสดีครับ", "กำลังทำงาน", "ພາສາລາວ", "ខ្មែរ", "မြန်မာ",
    "ትግርኛ", "ქართული", "Հայերեն", "Ελληνικά κείμενα", "Русский текст", "Українська мова", "Српски језик",
    "Tiếng Việt có dấu", "Türkçe ğüşıöç", "Polski: zażółć gęślą jaźń", "Čeština: příliš žluťoučký kůň",
    "Íslenska: þetta er ð", "Dansk: æøå ÆØÅ", "Deutsch: Größe, Straße, ẞ", "Français: œuvre, façade, élève",
    "Español: ¿Qué tal? ¡Bien!", "Português: ação, não", "Română: ăâîșț")
# Accented Latin, composed (NFC) and decomposed (NFD) forms, lone combining marks.
latin = ["café", "naïve", "résumé", "Ångström", "crème brûlée", "Zoë", "piñata", "façade", "Ǆ ǅ ǆ", "ḱṷṓn",
         "Ệ ệ", "ǖǘǚǜ", "Å Å", "ﬁ ligature", "Ω Ω ohm"]
for w in latin:
    add(w, unicodedata.normalize("NFD", w))
add("e\u0301", "e\u0301\u0301", "a\u0308\u0304", "\u0301 leading combining acute", "x\u0301\u0302\u0303\u0304",
    "\u0300\u0301\u0302", "Z\u0351\u0352\u0353\u0354a\u0355\u0356l\u0357g\u0358o", "q\u0307\u0323", "ạ\u0302",
    "\u1100\u1161\u11a8 conjoining jamo", "\u0915\u094d\u0937", "\u0e01\u0e33", "\u212b angstrom sign",
    "\u2126 ohm sign", "a\u030a vs \u00e5", "n\u0303 vs \u00f1", "'\u0301s", "1\u0301", "\u0301\u0661", " \u0301x")
# Special tokens inline.
add("<|im_start|>user\nHello<|im_end|>\n", "<|endoftext|>", "text<|endoftext|>more", "<|im_start|><|im_end|>",
    "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{\"name\": \"f\"}</tool_call>", "a<|im_end|>b<|im_start|>c",
    "<|im_start", "<|im_start|", "<|im_end|>>", "<<|im_end|>", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<|vision_start|><|image_pad|><|vision_end|>", "<tts_text_bos_single>x<tts_text_bos>", " <|im_end|> ",
    "<|IM_START|> is not special", "<think> <think>", "</think></think>", "<|endoftext|><|endoftext|>",
    "<|audio_start|><|audio_pad|><|audio_end|>", "<|object_ref_start|>the dog<|object_ref_end|>",
    "<|box_start|>(1,2),(3,4)<|box_end|>", "<|repo_name|>qgpu<|file_sep|>main.cpp", "<tool_response>ok</tool_response>")
# Very long words and repetitions.
add("a" * 300, "ab" * 200, "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
    "https://example.com/" + "verylongpathsegment" * 20, "ha" * 100 + "!", "=" * 80, "-" * 120, "#" * 64,
    "." * 50, "!" * 33, "0" * 100, "🙂" * 50, "你" * 100, "\n" * 40, "\t" * 30, " " * 200 + "x",
    "supercalifragilisticexpialidocious " * 10, "lorem ipsum dolor sit amet " * 20)
# Bytes outside common text: control characters, private use, noncharacters, supplementary planes.
add("\x00null\x01soh\x1fus\x7fdel", "\ue000\uf8ff private use", "\U000f0000 plane 15", "\ufffd replacement",
    "\ufeffBOM at start", "\ufffe\uffff noncharacters", "𝐁𝐨𝐥𝐝 𝑰𝒕𝒂𝒍𝒊𝒄 math", "𝔉𝔯𝔞𝔨𝔱𝔲𝔯", "🂡🂢 cards",
    "\U0001d11e music", "𓀀 hieroglyph", "ᚠᛇᚻ runes", "\u00ad soft\u00adhyphen", "a\u200db zwj", "a\u200cb zwnj",
    "\u202eRTL override", "\u2066isolate\u2069", "©®™℠", "€£¥₹₿", "±×÷≠≤≥∞∑∏√∫", "←↑→↓↔", "♠♣♥♦", "★☆✓✗",
    "“smart” ‘quotes’", "«guillemets» ‹single›", "— – ‒ ‐", "…", "•·‧", "°C °F", "µs μs")

# Mixed paragraphs.
add("The model card says: \"Qwen3.5 models operate in thinking mode by default.\"\nUse <think> tags.\n\n",
    "Résumé of 李明 (Li Ming): 5 years @ 深圳, speaks العربية & हिन्दी. 👍🏽\r\n",
    "| col1 | col2 |\n|------|------|\n| 1    | 2    |\n", "- item one\n- item two\n  - nested\n",
    "> quoted line\n>> nested quote", "**bold** _italic_ `code` ~~strike~~", "$$E = mc^2$$ and $\\alpha + \\beta$",
    "JSON: {\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}", "YAML:\n  key: value\n  list:\n    - a\n")

# Deterministic pseudo-random strings over a mixed alphabet (fixed seed).
rng = random.Random(20251129)
alphabet = (list("abcXYZ019 '\t\n\r.,!?-_") + ["é", "e\u0301", "ß", "你", "好", "ا", "ש", "क", "ि", "्", "ก", "ั",
            "🙂", "👍", "🏽", "\u200d", "\u00a0", "\u3000", "١", "Ⅻ", "<|im_end|>", "<think>", "'s", "'LL"])
for i in range(60):
    n = rng.randint(1, 40)
    add("".join(rng.choice(alphabet) for _ in range(n)))

for text in cases:
    print(json.dumps(text, ensure_ascii=True))
