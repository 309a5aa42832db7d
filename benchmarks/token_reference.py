"""Reference token counts for the token estimate: chat-like texts per script, counted by real BPE tokenizers.

The estimate (``openclaw_lossless/capture/token_estimate.py`` and ``descriptorTokens`` in ``plugin/descriptors.js``)
is a weighted character count, calibrated against these counts; ``tests/test_token_estimate.py`` checks it
against them per script. The counts come from OpenAI's ``o200k_base`` (GPT-4o and later) and ``cl100k_base``
(GPT-4, GPT-3.5) encodings, run by ``tiktoken`` on the BPE rank files the ``bpe-openai`` package ships (checked
against tiktoken's published sha256 of each file). Neither package is a dependency of the project: nothing
counts real tokens at run time. To regenerate, in a scratch virtualenv (offline is fine, PyPI only):

    pip install tiktoken bpe-openai
    python benchmarks/token_reference.py   # writes tests/fixtures/token_reference.json

The texts were written for this project: ordinary messages a user or an agent sends, in each script.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "token_reference.json"

# tiktoken's published sha256 of each rank file (tiktoken_ext/openai_public.py).
EXPECTED_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

TEXTS: dict[str, list[str]] = {
    "english": [
        "The staging password rotates every Tuesday, so don't hard-code it in the deploy script.",
        "Can you remind me what we decided about the database migration last week? I think we agreed to run it"
        " on a Sunday night when traffic is lowest, but I'm not sure whether Maria signed off on the rollback"
        " plan or whether we still need her approval before scheduling it.",
        "Thanks! That worked. One more thing: the invoice from the hosting provider went up by about forty"
        " percent this month. Could you look into which services are responsible and suggest what we could"
        " turn off without hurting the customers?",
        "I moved the meeting with the design team to Thursday afternoon because half of them are travelling on"
        " Wednesday. Please update the shared calendar and let everyone know that the agenda hasn't changed.",
    ],
    "code": [
        'def load(path: str) -> dict[str, Any]:\n    with open(path, encoding="utf-8") as handle:\n'
        "        return json.load(handle)\n",
        '{"name": "lossless", "version": "0.4.1", "dependencies": {"fastapi": ">=0.110", "uvicorn": "^0.29"}}',
        "SELECT m.id, m.role, m.text FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        " WHERE s.agent_id = ? ORDER BY m.id DESC LIMIT 20;",
        "const answer = await fetch(`${base}/v1/hooks/assemble`, { method: 'POST', headers, body });\n"
        "if (!answer.ok) throw new Error(`assemble failed: ${answer.status}`);",
    ],
    "digits": [
        "Order 4471923 shipped on 2026-03-14 at 09:41; tracking 1Z 999 AA1 01 2345 6784.",
        "Totals: 1,284.50 + 312.75 + 98.10 = 1,695.35 EUR (VAT 19% = 322.12).",
        "Call me at +49 170 5551234 or +1 (415) 555-0198 between 8 and 17 h.",
        "3.14159 2.71828 1.41421 1.73205 0.57721 1.61803 4.66920 2.50290",
    ],
    "latin-diacritics": [
        "Est-ce que tu peux me rappeler ce qu'on a décidé pour la réunion de jeudi ? Je crois qu'on devait"
        " déplacer la présentation à la semaine prochaine.",
        "Könntest du bitte die Rechnung für März prüfen? Die Beträge für die Übernachtungen in München"
        " stimmen nicht mit der Buchungsbestätigung überein.",
        "¿Me puedes recordar cuándo vence el contrato de alquiler? Creo que la renovación automática está"
        " prevista para el próximo año, pero no estoy seguro.",
        "Chúng ta đã quyết định chuyển buổi họp sang thứ Năm vì nhiều người trong nhóm thiết kế đi công tác"
        " vào thứ Tư.",
        "Czy możesz sprawdzić, dlaczego wdrożenie nie powiodło się wczoraj wieczorem? Wygląda na to, że"
        " zabrakło miejsca na dysku.",
    ],
    "han": [
        "我们上周讨论的数据库迁移计划，你还记得最后决定在哪天执行吗？",
        "今天天气很好，我们下午去公园散步吧。顺便把上次借的书还给图书馆。",
        "请帮我检查一下这个月的账单，主机服务的费用比上个月高了大约百分之四十，我想知道是哪些服务造成的，"
        "以及哪些可以关掉而不影响客户。",
        "會議改到星期四下午，因為設計團隊有一半的人星期三要出差。請更新共享日曆並通知大家議程沒有變。",
    ],
    "japanese": [
        "先週話し合ったデータベースの移行について、最終的にいつ実行することになったか覚えていますか？",
        "ありがとうございます。うまくいきました。もう一つ、今月のサーバー代が先月より四割ほど高くなっています。",
        "デザインチームの半分が水曜日に出張するので、打ち合わせを木曜日の午後に変更しました。"
        "共有カレンダーを更新して、皆さんに議題は変わっていないと伝えてください。",
        "このエラーメッセージの意味を教えてください。ログには「ディスクの空き容量が不足しています」と出ています。",
    ],
    "hangul": [
        "지난주에 논의한 데이터베이스 마이그레이션을 언제 실행하기로 했는지 기억나세요?",
        "감사합니다. 잘 됐어요. 그런데 이번 달 호스팅 비용이 지난달보다 40퍼센트 정도 올랐어요. 어떤 서비스 때문인지"
        " 확인해 주실 수 있나요?",
        "디자인 팀 절반이 수요일에 출장을 가서 회의를 목요일 오후로 옮겼습니다. 공유 캘린더를 업데이트하고 모두에게"
        " 알려 주세요.",
        "오늘 날씨가 정말 좋네요. 오후에 공원에 산책하러 갈까요?",
    ],
    "cyrillic": [
        "Напомни, пожалуйста, что мы решили насчёт миграции базы данных на прошлой неделе?",
        "Спасибо, всё заработало. Ещё один вопрос: счёт от хостинга вырос примерно на сорок процентов."
        " Можешь выяснить, какие сервисы за это отвечают?",
        "Я перенёс встречу с командой дизайнеров на четверг, потому что половина из них в среду в командировке.",
        "Чи можеш перевірити, чому розгортання вчора ввечері не вдалося? Схоже, закінчилося місце на диску.",
    ],
    "greek": [
        "Μπορείς να μου θυμίσεις τι αποφασίσαμε για τη μετάβαση της βάσης δεδομένων την περασμένη εβδομάδα;",
        "Ευχαριστώ, λειτούργησε. Ο λογαριασμός της φιλοξενίας αυξήθηκε περίπου σαράντα τοις εκατό αυτόν τον μήνα.",
        "Μετέφερα τη συνάντηση με την ομάδα σχεδιασμού για την Πέμπτη το απόγευμα.",
    ],
    "arabic": [
        "هل يمكنك أن تذكرني بما قررناه بشأن ترحيل قاعدة البيانات الأسبوع الماضي؟",
        "شكراً، لقد نجح الأمر. فاتورة الاستضافة ارتفعت بنحو أربعين بالمئة هذا الشهر، هل يمكنك معرفة السبب؟",
        "نقلت الاجتماع مع فريق التصميم إلى يوم الخميس بعد الظهر لأن نصفهم مسافر يوم الأربعاء.",
    ],
    "hebrew": [
        "אתה יכול להזכיר לי מה החלטנו לגבי העברת מסד הנתונים בשבוע שעבר?",
        "תודה, זה עבד. החשבון של האחסון עלה בערך בארבעים אחוז החודש, אתה יכול לבדוק למה?",
        "העברתי את הפגישה עם צוות העיצוב ליום חמישי אחר הצהריים.",
    ],
    "devanagari": [
        "क्या आप मुझे याद दिला सकते हैं कि पिछले हफ्ते डेटाबेस माइग्रेशन के बारे में हमने क्या तय किया था?",
        "धन्यवाद, यह काम कर गया। इस महीने होस्टिंग का बिल लगभग चालीस प्रतिशत बढ़ गया है।",
        "मैंने डिज़ाइन टीम के साथ बैठक गुरुवार दोपहर को कर दी है क्योंकि आधे लोग बुधवार को यात्रा पर हैं।",
    ],
    "thai": [
        "คุณช่วยเตือนฉันหน่อยได้ไหมว่าเราตัดสินใจอย่างไรเรื่องการย้ายฐานข้อมูลเมื่อสัปดาห์ที่แล้ว",
        "ขอบคุณครับ ใช้ได้แล้ว ค่าโฮสติ้งเดือนนี้เพิ่มขึ้นประมาณสี่สิบเปอร์เซ็นต์ ช่วยตรวจสอบหน่อยได้ไหม",
        "ฉันย้ายการประชุมกับทีมออกแบบไปเป็นวันพฤหัสบดีตอนบ่าย",
    ],
    "emoji": [
        "🎉🎉🎉 we shipped it!!! 🚀🔥",
        "😀😃😄😁😆😅😂🤣😊😇",
        "👍 👎 ❤️ ✅ ❌ ⚠️ 📌 📎 🗓️ ⏰",
        "👨‍👩‍👧‍👦 family trip 🏖️🌊☀️ next week 🇩🇪✈️🇯🇵",
    ],
    "mixed": [
        "部署 failed again: error ECONNREFUSED 127.0.0.1:8377，请检查 sidecar 是否在运行。",
        "明日の meeting は 10:00 から Zoom で、agenda は shared doc にあります。",
        "Сервер вернул 502 Bad Gateway после деплоя v2.3.1 — откатываю.",
    ],
}


def _encoding(name: str, data: Path) -> Any:
    """A tiktoken Encoding over the packaged rank file, refused unless it is byte-for-byte the published one."""
    tiktoken = importlib.import_module("tiktoken")
    public = importlib.import_module("tiktoken_ext.openai_public")
    raw = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != EXPECTED_SHA256[name]:
        raise SystemExit(f"{name}: the packaged rank file is not the published one")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}
    return tiktoken.Encoding(name=name, pat_str=_pattern(public, name), mergeable_ranks=ranks, special_tokens={})


def _pattern(public: Any, name: str) -> str:
    """The encoding's split pattern, taken from tiktoken's own definition without its download."""
    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *args, **kwargs: {}
    try:
        return str(getattr(public, name)()["pat_str"])
    finally:
        public.load_tiktoken_bpe = original


def main() -> None:
    bpe_openai = importlib.import_module("bpe_openai")
    data = Path(str(bpe_openai.__file__)).parent / "data"
    encodings = {name: _encoding(name, data) for name in EXPECTED_SHA256}
    tiktoken = importlib.import_module("tiktoken")
    texts = [
        {"script": script, "text": text, "tokens": {name: len(enc.encode(text)) for name, enc in encodings.items()}}
        for script, items in TEXTS.items()
        for text in items
    ]
    fixture = {
        "about": "Real token counts of chat-like texts per script, the reference for the token estimate.",
        "tokenizers": {name: f"tiktoken {tiktoken.__version__}, rank file from bpe-openai" for name in encodings},
        "generator": "benchmarks/token_reference.py",
        "texts": texts,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(texts)} texts to {OUT}")


if __name__ == "__main__":
    main()
