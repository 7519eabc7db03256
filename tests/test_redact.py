"""Secret scanning: every rule catches its samples, ordinary text and code pass untouched.

Fake secrets are built at runtime (``_token``) so no whole token appears in this file.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gitmem.redact import PLACEHOLDER, RULES, Finding, redact, scan, shannon_entropy

ALL_KEYWORDS = sorted({k for rule in RULES for k in rule.keywords})


def _token(prefix: str, length: int, alphabet: str = string.ascii_letters + string.digits, seed: int = 0) -> str:
    rng = random.Random(f"{prefix}{length}{seed}")
    return prefix + "".join(rng.choice(alphabet) for _ in range(length))


def _rule_samples(kind: str):
    return [pytest.param(rule.id, sample, id=f"{rule.id}-{i}")
            for rule in RULES for i, sample in enumerate(getattr(rule, kind))]


# ---- the rule table -------------------------------------------------------------------------

def test_rule_ids_are_unique_gitleaks_style_names():
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert all(i == i.lower() and " " not in i for i in ids)


def test_every_rule_has_true_and_false_samples_and_lowercase_keywords():
    for rule in RULES:
        assert rule.true_samples and rule.false_samples, rule.id
        assert rule.keywords and all(k == k.lower() for k in rule.keywords), rule.id


@pytest.mark.parametrize("rule_id,sample", _rule_samples("true_samples"))
def test_rule_catches_its_true_sample(rule_id, sample):
    redacted, findings = redact(sample)
    assert rule_id in {f.rule for f in findings}
    assert PLACEHOLDER.format(rule=rule_id) in redacted
    assert scan(redacted) == []


@pytest.mark.parametrize("rule_id,sample", _rule_samples("false_samples"))
def test_rule_false_sample_is_left_alone(rule_id, sample):
    assert redact(sample) == (sample, [])


@pytest.mark.parametrize("rule_id,sample", _rule_samples("true_samples"))
def test_every_match_contains_a_keyword_so_the_prefilter_never_hides_one(rule_id, sample):
    rule = next(r for r in RULES if r.id == rule_id)
    matches = list(rule.regex.finditer(sample))
    assert matches
    for match in matches:
        assert any(k in match.group(0).lower() for k in rule.keywords)


# ---- things that are not secrets ------------------------------------------------------------

ORDINARY = [
    hashlib.sha1(b"a commit").hexdigest(),
    "fixed in " + hashlib.sha1(b"another").hexdigest() + " on main",
    "sha256:" + hashlib.sha256(b"a layer").hexdigest(),
    str(uuid.uuid5(uuid.NAMESPACE_URL, "https://example.com/memory")),
    "request id " + str(uuid.uuid5(uuid.NAMESPACE_DNS, "example.com")),
    'DATA = "' + base64.b64encode(b"just some ordinary text that someone encoded in a test").decode() + '"',
    'password = os.environ["X"]',
    "token = get_token()",
    "api_key: str",
    "def login(username: str, password: str) -> Session:",
    "if not token: raise AuthError('missing token')",
    "https://docs.example.com/auth/tokens?page=2#section",
    "https://user@example.com/repo.git",
    "The tokenizer splits text into tokens; the tokenizer's vocab has 100k entries.",
    "Use the auth middleware; secrets live in Vault, never in the repo.",
    "Rotate the API key monthly (see docs/keys.md).",
    "keyboard shortcuts: ctrl-k opens the palette",
    "for key, value in sorted(mapping.items()):\n    print(key, value)",
    "passwords must be at least 12 characters",
    "export GITHUB_TOKEN=$GITHUB_TOKEN",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "secret_key = settings.SECRET_KEY",
    "Bearer tokens go in the Authorization header.",
]
PLACEHOLDERS = [PLACEHOLDER.format(rule=rule.id) for rule in RULES]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_and_code_are_not_secrets(text):
    assert scan(text) == []


@pytest.mark.parametrize("text", PLACEHOLDERS + [f"password = {p}" for p in PLACEHOLDERS]
                         + [f'"api_key": "{p}"' for p in PLACEHOLDERS]
                         + [f"https://user:{p}@host/" for p in PLACEHOLDERS])
def test_a_placeholder_is_never_flagged(text):
    assert scan(text) == []


# ---- what redaction replaces ----------------------------------------------------------------

def test_password_in_url_keeps_scheme_user_and_host():
    password = _token("", 18)
    out, findings = redact(f"DATABASE_URL=postgres://app:{password}@db.example.com:5432/prod")
    assert out == "DATABASE_URL=postgres://app:[REDACTED:password-in-url]@db.example.com:5432/prod"
    assert [f.rule for f in findings] == ["password-in-url"]


def test_generic_assignment_keeps_the_name_and_quotes():
    value = _token("", 24, seed=1)
    assert redact(f"DB_PASSWORD = '{value}'  # prod")[0] == "DB_PASSWORD = '[REDACTED:generic-api-key]'  # prod"
    assert redact(f"password: {value}\nuser: app")[0] == "password: [REDACTED:generic-api-key]\nuser: app"


def test_private_key_goes_as_a_whole_block():
    body = "\n".join(_token("", 64, string.ascii_letters + string.digits + "+/", seed=i) for i in range(5))
    block = "-----BEGIN " + "RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
    out, findings = redact(f"key.pem:\n{block}\n(done)")
    assert out == "key.pem:\n[REDACTED:private-key]\n(done)"
    assert findings == [Finding("private-key", len("key.pem:\n"), len("key.pem:\n") + len(block))]


@pytest.mark.parametrize("sample", next(r for r in RULES if r.id == "private-key").true_samples)
def test_every_private_key_form_is_replaced_entirely(sample):
    # PEM, OpenSSH, encrypted-PEM headers, JSON-escaped newlines, and a key truncated before END
    assert redact(sample)[0] == "[REDACTED:private-key]"


def test_offsets_point_at_the_secret_in_the_original_text():
    token = _token("gh" + "p_", 36)
    text = f"İstanbul café notes — the deploy bot uses {token} for pushes"
    [finding] = scan(text)
    assert text[finding.start:finding.end] == token
    assert finding.rule == "github-pat"


def test_multiple_secrets_all_go_and_the_text_around_them_is_byte_identical():
    secrets = [
        _token("gh" + "p_", 36, seed=2),
        _token("AK" + "IA", 16, string.ascii_uppercase + "234567"),
        _token("sk-ant-" + "api03-", 93, string.ascii_letters + string.digits + "-_") + "AA",
        _token("xoxb-", 12, string.digits) + "-" + _token("", 24),
    ]
    pieces = ["Setup notes:\n  1. gh uses ", "\n  2. aws key id ", " (rotated)\n  3. claude: ", "\n  4. slack ", "\n"]
    text = pieces[0] + "".join(s + p for s, p in zip(secrets, pieces[1:]))
    out, findings = redact(text)
    assert [text[f.start:f.end] for f in findings] == secrets
    expected = pieces[0] + "".join(PLACEHOLDER.format(rule=f.rule) + p for f, p in zip(findings, pieces[1:]))
    assert out == expected
    assert [f.rule for f in findings] == ["github-pat", "aws-access-token", "anthropic-api-key", "slack-token"]


def test_a_token_inside_an_assignment_is_one_finding_named_by_the_specific_rule():
    token = _token("gh" + "p_", 36, seed=3)
    out, findings = redact(f'GITHUB_TOKEN="{token}"')
    assert out == 'GITHUB_TOKEN="[REDACTED:github-pat]"'
    assert len(findings) == 1


def test_overlapping_matches_merge_so_no_secret_byte_survives():
    inner = _token("AI" + "za", 35, string.ascii_letters + string.digits + "-_")
    text = f"api_key = Xy9!{inner}"
    out, findings = redact(text)
    assert out == "api_key = [REDACTED:generic-api-key]"
    assert findings == [Finding("generic-api-key", len("api_key = "), len(text))]


def test_a_key_hidden_by_its_glued_neighbour_is_found_once_the_neighbour_is_redacted():
    # A Google key must not run on into [\w-]; glued to a PEM block's dashes it only shows up once
    # the block is replaced, so scan() keeps scanning until the redacted text is clean.
    def pem(seed):
        body = "\n".join(_token("", 64, string.ascii_letters + string.digits + "+/", seed=seed + i) for i in range(3))
        return "-----BEGIN " + "PRIVATE KEY-----\n" + body + "\n-----END PRIVATE KEY-----"

    first, key, second = pem(10), _token("AI" + "za", 35, string.ascii_letters + string.digits + "-_"), pem(20)
    text = first + "\n" + key + second
    out, findings = redact(text)
    assert out == "[REDACTED:private-key]\n[REDACTED:google-api-key][REDACTED:private-key]"
    assert [(f.rule, text[f.start:f.end]) for f in findings] == [
        ("private-key", first), ("google-api-key", key), ("private-key", second)]


def test_low_entropy_and_digit_free_names_are_not_generic_secrets():
    assert scan("password = aaaaaaaaaaaa") == []
    assert scan("token = TokenProvider") == []
    assert scan("token = x7K2" + "q9Lm") != []


@pytest.mark.parametrize("line,kept", [
    ("DB_PASSWORD=hunter2hunter2", "DB_PASSWORD="), ('DB_PASSWORD="hunter2hunter2"', 'DB_PASSWORD="'),
    ("password: hunter2hunter2", "password: "), ("PGPASSWORD=correcthorsebattery", "PGPASSWORD="),
    ("password: correcthorse", "password: "), ("  db_password: correcthorse  # staging\n", "  db_password: "),
    ('password = "correcthorse"', 'password = "'), ("password: 'correcthorse'", "password: '"),
    ("password: Correcthorse", "password: "), ("  db_password: Correcthorse  # staging\n", "  db_password: "),
    ("PASSWORD=correcthorse", "PASSWORD="),
])
def test_a_password_name_makes_a_low_entropy_value_a_secret(line, kept):
    """A `.env` line an agent hook recorded must not reach `gitmem push` because its password is a word."""
    out, findings = redact(line)
    assert out.startswith(kept) and "hunter2" not in out and "correcthorse" not in out and len(findings) == 1


@pytest.mark.parametrize("line", [
    "password: str", "password = get_password()", "password=password", "password: Optional[str] = None",
    'pwd = os.environ["PWD"]', "PASSWORD_MIN_LENGTH=8", "password_hash = bcrypt(password)", "DB_PASS=${DB_PASS}",
    "password: <password>", "DB_PASSWORD=changeme", "password: '****'", "password: xxx", "DB_PASSWORD=your-password-here",
    "the password: must be rotated monthly", "password: see the vault", "password_required: true",
    "PASSWORD_EXPIRY_DAYS=90", "the password is stored in vault", "Changed the admin password: yesterday",
    "password: enabled", 'password: "${DB_PASSWORD}"', "password = userinput", "password: Optional",
])
def test_code_templates_prose_and_settings_next_to_a_password_name_are_kept(line):
    assert redact(line) == (line, [])


def test_shannon_entropy_measures_randomness():
    assert shannon_entropy("") == 0.0
    assert shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)
    assert shannon_entropy(_token("", 64)) > shannon_entropy("the tokenizer splits words")


def test_redaction_is_idempotent_on_every_sample():
    for rule in RULES:
        for sample in rule.true_samples + rule.false_samples:
            once = redact(sample)[0]
            assert redact(once) == (once, [])


# ---- properties -----------------------------------------------------------------------------

printable = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=400)


@given(printable)
@settings(max_examples=300)
def test_text_without_any_keyword_is_returned_unchanged(text):
    assume(not any(k in text.lower() for k in ALL_KEYWORDS))
    assert redact(text) == (text, [])


SAMPLES = [s for rule in RULES for s in rule.true_samples + rule.false_samples] + ORDINARY + PLACEHOLDERS
pieces = st.one_of(st.sampled_from(SAMPLES), printable, st.sampled_from([" ", "\n", "=", ": ", '"', "'", "@"]))


@given(st.lists(pieces, max_size=8).map("".join))
@settings(max_examples=300, deadline=None)
def test_redaction_is_idempotent_and_findings_are_sorted_disjoint_spans(text):
    out, findings = redact(text)
    assert all(0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in zip(findings, findings[1:]))
    assert redact(out) == (out, [])


@given(st.lists(pieces, max_size=8).map("".join))
@settings(max_examples=300, deadline=None)
def test_every_regex_match_contains_one_of_its_keywords(text):
    for rule in RULES:
        for match in rule.regex.finditer(text):
            assert any(k in match.group(0).lower() for k in rule.keywords), rule.id


def test_docs_list_every_rule():
    from pathlib import Path

    docs = (Path(__file__).resolve().parent.parent / "docs" / "redact.md").read_text()
    assert [rule.id for rule in RULES if f"| `{rule.id}` |" not in docs] == []


# ---- the families issue 14 found missing, and values of any length ----------------------------

HEX = "0123456789abcdef"
B64 = string.ascii_letters + string.digits + "+/"
FAMILIES = [
    ("sendgrid", "SENDGRID_KEY " + _token("S" + "G.", 22, seed=40) + "." + _token("", 43, seed=41)),
    ("twilio api key", "twilio: " + _token("S" + "K", 32, HEX, seed=42)),
    ("twilio auth token", "TWILIO_AUTH_TOKEN=" + _token("", 32, HEX, seed=43)),
    ("azure storage AccountKey", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
     + _token("", 86, B64, seed=44) + "==;EndpointSuffix=core.windows.net"),
    ("azure SAS sig", "https://acme.blob.core.windows.net/c/x?sv=2022-11-02&sp=r&sig="
     + _token("", 40, string.ascii_letters + string.digits, seed=45) + "%2B" + _token("", 3, seed=46) + "%3D"),
    ("digitalocean", "do token " + _token("do" + "p_v1_", 64, HEX, seed=47)),
    ("shopify", "X-Shopify-Access-Token: " + _token("shp" + "at_", 32, HEX, seed=48)),
    ("gitlab runner", "runner token " + _token("gl" + "rt-", 20, seed=49)),
    ("gitlab deploy", "deploy: " + _token("gl" + "dt-", 20, seed=50)),
    ("stripe webhook", "endpoint secret " + _token("wh" + "sec_", 32, seed=51)),
    ("redis url", "cache at redis://:" + _token("", 20, seed=52) + "@cache.internal:6379"),
    ("DB_PASS", "DB_PASS=" + _token("", 16, seed=53)),
    ("putty key", "PuTTY-User-Key-File-" + "2: ssh-rsa\nEncryption: none\nComment: imported\nPublic-Lines: 1\n"
     + _token("", 64, B64, seed=54) + "\nPrivate-Lines: 1\n" + _token("", 64, B64, seed=55)
     + "\nPrivate-MAC: " + _token("", 40, HEX, seed=56)),
    ("STS session token (1,000 chars)", "aws_session_token = " + _token("IQoJb3JpZ2luX2Vj", 1000, B64, seed=57)),
    ("300-char secret", 'client_secret: "' + _token("", 300, seed=58) + '"'),
]


@pytest.mark.parametrize("family,sample", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_every_family_the_issue_found_missing_is_caught_and_no_secret_byte_survives(family, sample):
    out, findings = redact(sample)
    assert findings, family
    for finding in findings:
        secret = sample[finding.start:finding.end]
        assert secret not in out
    assert scan(out) == []


def test_a_secret_value_of_any_length_goes_entirely():
    for length in (8, 200, 201, 5000):
        value = _token("", length, seed=length)
        out, findings = redact(f"API_TOKEN={value}\nnext line")
        assert out == "API_TOKEN=[REDACTED:generic-api-key]\nnext line", length


def test_bare_placeholders_fit_tags_and_sources_and_are_never_flagged_again():
    from gitmem.redact import redact_bare

    token = _token("gh" + "p_", 36, seed=60)
    out, findings = redact_bare(f"mcp:{token}")
    assert out == "mcp:REDACTED:github-pat" and len(findings) == 1
    assert scan(out) == []
    assert scan("api_key:REDACTED:generic-api-key") == []
    # a bare placeholder does not hide a secret glued after it
    assert [f.rule for f in scan("REDACTED:github-pat-" + token)] == ["github-pat"]
    assert [f.rule for f in scan("REDACTED:github-pat " + token)] == ["github-pat"]


def test_the_keyword_prefilter_switches_on_exactly_the_rules_whose_keywords_occur():
    from gitmem.redact import _candidate_rules

    texts = [s.lower() for s in SAMPLES] + ["passkey sk-ant- accountkey eyj", ""]
    for text in texts:
        expected = [i for i, rule in enumerate(RULES) if any(k in text for k in rule.keywords)]
        assert _candidate_rules(text) == expected


_LINES = [s for r in RULES for s in (*r.true_samples, *r.false_samples)] + [
    "author:", "  name: bench", "PaSsWoRd = 'Zq8#kd9Lm2Pw0x'", "paſsword=Zq8kd9Lm2Pw0xR7", "\u212aey: Zq8kd9Lm2Pw0xR7a",
    "İstanbul token=Zq8kd9Lm2Pw0xR7b", "", "  ", "text: 'the auth flow uses tokens'", 'secret: "ab\\nZq8kd9Lm2Pw0x"']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_LINES) | st.text(max_size=40), max_size=12), st.sampled_from(["\n", "\r\n", " "]))
def test_scanning_only_the_lines_with_a_keyword_finds_what_scanning_everything_finds(lines, sep):
    """A one-line rule searches only the lines that hold its keywords (fast on long texts); that
    must find exactly what searching the whole text finds, in any script and case."""
    import gitmem.redact as module

    text = sep.join(lines)
    fast = module._hits(text)
    everywhere = tuple(r._replace(one_line=False) for r in RULES)
    saved = module.RULES
    module.RULES = everywhere
    try:
        slow = module._hits(text)
    finally:
        module.RULES = saved
    assert fast == slow


@pytest.mark.parametrize("text", [
    "DISCORD_BOT_TOKEN={bot} for the café", "MAILGUN: key" + "-{hex} for the café",
])
def test_a_keyword_written_in_capitals_is_found_in_text_that_is_not_ascii(text):
    """A rule case-insensitive only in its name part (``(?i:mailgun)``) still finds its line in any text."""
    text = text.format(bot=DISCORD_BOT, hex=_token("", 32, HEX, seed=93))
    out, findings = redact(text)
    assert findings and "REDACTED" in out and out.endswith(" for the café")


def test_what_a_push_remembers_as_clean_is_keyed_by_the_rules(monkeypatch):
    """A blob scanned clean is remembered under rules_key(); a changed rule must change the key,
    or a push would skip a blob the new rule flags."""
    import gitmem.redact as module

    module.rules_key.cache_clear()
    before = module.rules_key()
    assert module.rules_key() == before  # stable within a process (and across: no ids or addresses)
    last = RULES[-1]
    monkeypatch.setattr(module, "RULES", RULES[:-1] + (last._replace(entropy=(last.entropy or 0) + 0.5),))
    module.rules_key.cache_clear()
    try:
        assert module.rules_key() != before
    finally:
        monkeypatch.undo()
        module.rules_key.cache_clear()
    assert module.rules_key() == before


def test_the_blob_scan_reads_yaml_escapes_in_every_value_a_key_written_twice_included():
    from gitmem.redact import blob_is_clean

    escaped = b'text: "deploy gh\\x70_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"\n'
    assert not blob_is_clean(escaped)  # the bytes hold no token; the YAML gitmem reads does
    assert not blob_is_clean(escaped + b"text: harmless\n")  # a loader keeps the last of a key written twice
    assert blob_is_clean(b'text: "a \\"quoted\\" word"\n') and blob_is_clean(b"text: [unclosed \\\n")


# ---- an audit of what agents paste: credential shapes the table missed, placeholders it flagged --------------

B64URL = string.ascii_letters + string.digits + "_-"
# every part starting with a letter: shaped like a dotted name (``self.token.value``), which code assigns
DISCORD_BOT = _token("M", 23, seed=70) + "." + _token("G", 5, seed=71) + "." + _token("a", 37, seed=72)
MISSED = [
    ("slack app-level token", "SLACK_APP_TOKEN " + _token("xa" + "pp-1-A0", 9, string.ascii_uppercase + string.digits, seed=73)
     + "-" + _token("", 13, string.digits, seed=74) + "-" + _token("", 64, HEX, seed=75)),
    ("discord webhook", "https://discord.com/api/" + "webhooks/1163662340359917557/" + _token("", 68, seed=76)),
    ("discord bot token env", "DISCORD_BOT_TOKEN=" + DISCORD_BOT),
    ("discord bot token header", "Authorization: Bot " + DISCORD_BOT),
    ("netrc", "machine api.github.com login ada password " + _token("", 20, seed=77)),
    ("netrc across lines", "machine api.heroku.com\n  login ada@example.com\n  password " + _token("", 36, seed=78) + "\n"),
    ("mailgun key-", "mailgun: " + _token("key" + "-", 32, HEX, seed=79)),
    ("a --token flag", "gh auth login --hostname ghe.internal --token " + _token("", 40, seed=100)),
    ("curl -u user:password", "curl -fsS -u ci-bot:" + _token("", 20, seed=101) + " https://jenkins.internal/job/x/build"),
    ("mailgun's newer key", "mailgun sending key " + "-".join(_token("", n, HEX, seed=98 + n) for n in (32, 8, 8))),
    ("an UPPER_CASE *_KEY variable", "ENCRYPTION_KEY=" + _token("", 44, B64, seed=80)),
    ("k8s data under a *_KEY name", "kind: Secret\ndata:\n  STRIPE_KEY: " + base64.b64encode(
        _token("sk_" + "live_", 24, seed=81).encode()).decode() + "\n"),
    ("databricks token in prose", "the notebook job uses " + _token("da" + "pi", 32, HEX, seed=94) + " for the workspace"),
    ("linear api key in prose", "the triage bot reads issues with " + _token("lin" + "_api_", 40, seed=95)),
    ("vault service token", "export VAULT_TOKEN=" + _token("hv" + "s.CAESI", 95, B64URL, seed=104)),
    ("vault service token in a header", "curl -H 'X-Vault-Token: " + _token("hv" + "s.", 100, seed=105) + "' https://vault:8200/v1/kv"),
    ("vault batch token", "token " + _token("hv" + "b.AAAAAQ", 160, B64URL, seed=106)),
    ("legacy vault token", "VAULT_TOKEN=s.Zc9E" + _token("", 19, seed=107) + "7"),  # a dotted name to generic-api-key
    ("age key file", "# public key: age1" + _token("", 58, "qpzry9x8gf2tvdw0s3jn54khce6mua7l", seed=96) + "\n"
     + _token("AGE-SECRET-" + "KEY-1", 58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", seed=97)),
]


@pytest.mark.parametrize("shape,sample", MISSED, ids=[s for s, _ in MISSED])
def test_a_credential_agents_paste_is_redacted_entirely(shape, sample):
    out, findings = redact(sample)
    assert findings, shape
    for finding in findings:
        assert sample[finding.start:finding.end] not in out
    assert scan(out) == []


@pytest.mark.parametrize("text", [
    "export GITHUB_TOKEN=" + "gh" + "p_" + "x" * 36, "token: " + "gh" + "o_" + "X" * 36,
    "STRIPE_KEY=" + "sk_" + "live_" + "x" * 24, "ANTHROPIC_API_KEY=" + "sk-ant-" + "api03-...",
    "OPENAI_API_KEY=sk-proj-abc123...", "api_key: abc123def456…",
    "aws_access_key_id = " + "AKIA" + "IOSFODNN7EXAMPLE", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "PUBLIC_KEY=" + _token("", 44, B64, seed=82), "ENV GPG_KEY=" + _token("", 40, HEX, seed=83).upper(),
    "cache_key = " + hashlib.sha1(b"x").hexdigest(), "the build machine has no login password prompt",
])
def test_documentation_placeholders_and_public_keys_are_left_alone(text):
    """Docs' ``ghp_xxxx…`` and elided ``sk-ant-api03-...``, AWS's published example key pair, public keys and
    hashes under ``key`` names are no secrets: replacing them only hides what a memory says."""
    assert redact(text) == (text, [])


@pytest.mark.parametrize("text", [
    "KMS_KEY=arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "export SSE_KEY=arn:aws:kms:eu-west-1:123456789012:alias/prod-data2",
    "DB_PASSWORD=arn:aws:secretsmanager:us-east-1:123456789012:secret:prod/db-AbCdEf",
    "ROLE_TOKEN: arn:aws:iam::123456789012:role/Deploy2",
])
def test_an_arn_names_a_key_or_secret_and_is_kept(text):
    """An ARN says which KMS key or stored secret to use: redacting it only hides what the memory says."""
    assert redact(text) == (text, [])


@pytest.mark.parametrize("text,out", [
    ("API_KEY=" + _token("s" + "k-", 20, seed=90), "API_KEY=[REDACTED:generic-api-key]"),
    ("KMS_KEY=" + _token("", 44, B64, seed=91), "KMS_KEY=[REDACTED:generic-api-key]"),
    ("KMS_KEY=arn" + _token("", 30, seed=92), "KMS_KEY=[REDACTED:generic-api-key]"),
])
def test_a_secret_under_a_key_name_still_goes_when_it_is_no_arn(text, out):
    assert redact(text)[0] == out


@pytest.mark.parametrize("text,out", [
    ("deploy --token {v} --verbose", "deploy --token [REDACTED:secret-flag] --verbose"),
    ("tool --api-key '{v}'", "tool --api-key '[REDACTED:secret-flag]'"),
    ("curl -u ada:{v} https://ci.internal/", "curl -u ada:[REDACTED:curl-auth-user] https://ci.internal/"),
    ("tool --api-key 'Gs={v}' -v", "tool --api-key '[REDACTED:secret-flag]' -v"),
    ('curl -X POST \\\n  --user "ada:{v}" \\\n  https://ci.internal/',
     'curl -X POST \\\n  --user "ada:[REDACTED:curl-auth-user]" \\\n  https://ci.internal/'),
])
def test_a_secret_on_a_command_line_goes_and_the_command_and_user_stay(text, out):
    value = _token("Zq8", 21, seed=102)
    assert redact(text.format(v=value))[0] == out


@pytest.mark.parametrize("text", [
    "tool --token-file /run/secrets/token", "docker login -u ada --password-stdin", "gh auth login --token $GH_TOKEN",
    'tool --token "${TOKEN}"', "tool --token <token>", "tool --token ghp_" + "x" * 36, "curl -u $USER:$PASS https://host/",
    "curl -u user:password https://host/", "mysql -u root --password app_production",
])
def test_a_flag_that_reads_the_secret_elsewhere_or_names_a_placeholder_is_kept(text):
    assert redact(text) == (text, [])


@pytest.mark.parametrize("text,out", [
    ("tool --password hunter2hunter2 --verbose", "tool --password [REDACTED:password-flag] --verbose"),
    ("sshpass --password 'correcthorse' ssh ada@host", "sshpass --password '[REDACTED:password-flag]' ssh ada@host"),
    ("mysql -e 'show tables' app | tool --db-password shop_2024",
     "mysql -e 'show tables' app | tool --db-password [REDACTED:password-flag]"),
    ("tool --password M=^A_ozpZk5Gc3lK", "tool --password [REDACTED:password-flag]"),
])
def test_a_word_after_a_password_flag_is_a_password(text, out):
    """Outside a database client a password flag's separate value is the password, word-like or not, an ``=`` in it
    included (only a lowercase key before one makes an option list)."""
    assert redact(text)[0] == out


@pytest.mark.parametrize("text", [
    "mysql -u root --password orders_2024_eu", "mysqldump --password shop2024db > dump.sql",
    "docker exec -it db mariadb -u root --password orders_2024_eu", "psql -U app --password orders_2024_eu",
    "mysql -h db.internal \\\n  -u root \\\n  --password orders_2024_eu",
])
def test_a_database_clients_password_flag_keeps_the_database_after_it(text):
    """mysql takes its password attached (``--password=pw``, ``-ppw``) and psql none: the word after it names the database."""
    assert redact(text) == (text, [])


@pytest.mark.parametrize("text", [
    "docker service create --secret prod-db-creds2 app", "podman run --rm --secret 'prod-db-creds2' app",
    "buildah build \\\n  --secret prod-db-creds2 .",
])
def test_a_container_tools_secret_flag_names_the_secret_and_is_kept(text):
    assert redact(text) == (text, [])


def test_a_putty_key_inside_json_goes_and_the_rest_of_the_json_stays():
    body = "\\n".join(["PuTTY-User-Key-File-" + "3: ssh-ed25519", "Encryption: none", "Public-Lines: 1",
                      _token("", 64, B64, seed=108), "Private-Lines: 1", _token("", 44, B64, seed=109),
                      "Private-MAC: " + _token("", 64, HEX, seed=110)])
    assert redact('{"key": "' + body + '", "user": "ada"}')[0] == '{"key": "[REDACTED:putty-private-key]", "user": "ada"}'


def test_a_netrc_default_entry_loses_its_password():
    assert redact("default login anonymous password " + _token("", 16, seed=111))[0] == (
        "default login anonymous password [REDACTED:netrc-password]")


def test_the_push_scan_applies_the_command_line_rules_too():
    from gitmem.redact import blob_is_clean

    assert not blob_is_clean(("text: deploy --token " + _token("Zq8", 21, seed=103) + "\n").encode())
    assert blob_is_clean(b"text: deploy --token-file /run/secrets/token\n")


# ---- what agents quote from tools' docs: kept, and a real value in its place still goes ----------------------

REAL = _token("Zq8", 21, seed=120)
TOOL_DOCS = [
    # (the usage a tool's docs or a .env.example show, the same place holding a real-shaped secret)
    ("ansible-playbook site.yml --private-key id_rsa_deploy2", "ansible-playbook site.yml --private-key " + REAL),
    ("terraform apply -var-file=prod.tfvars --private-key keys/deploy-2024.pem", "tool --private-key " + REAL),
    ("gcloud secrets versions access latest --secret prod-api-key-v2", "gcloud auth login --token " + REAL),
    ("kubeadm join 192.168.0.200:6443 --token abcdef.0123456789abcdef", "kubeadm join 10.0.0.1:6443 --token " + REAL),
    ("tool --api-key abcd1234efgh5678", "tool --api-key " + REAL),
    ("glab auth login --token glpat-" + "x" * 20, "glab auth login --token " + _token("gl" + "pat-", 20, seed=121)),
    ("DATABRICKS_TOKEN=dapi" + "0123456789abcdef" * 2, "DATABRICKS_TOKEN=" + _token("da" + "pi", 32, HEX, seed=122)),
    ("JWT_SECRET=change-this-to-a-random-string", "JWT_SECRET=" + REAL),
    ("SESSION_SECRET=replace-with-32-random-chars", "SESSION_SECRET=" + REAL),
    ("USERNAME=jane,PASSWORD=Example-123", "USERNAME=jane,PASSWORD=" + REAL),
    ("terraform import aws_secretsmanager_secret.db arn:aws:secretsmanager:us-east-1:123456789012:secret:prod-db-2024",
     "the db secret: " + REAL),
    ("gcloud run deploy app --set-secrets API_KEY=projects/123/secrets/api-key:2",
     "gcloud run deploy app --set-env-vars API_KEY=" + REAL),
    ("tool --token $env:GITHUB_TOKEN", "tool --token " + REAL),
    ("tool --password ${DB_PASSWORD:?required}", 'DB_PASSWORD="${DB_PASSWORD:-' + REAL + '}"'),
    ("curl -u guest:guest http://localhost:15672/api/overview", "curl -u guest:" + REAL + " http://localhost:15672/api/overview"),
]


@pytest.mark.parametrize("usage,real", TOOL_DOCS, ids=[u for u, _ in TOOL_DOCS])
def test_a_tools_documented_usage_is_kept_and_a_real_secret_in_its_place_goes(usage, real):
    """A memory quoting how to run a tool (a key file, a secret's name, a placeholder a .env.example or the docs
    count out) loses nothing; the same command or assignment holding a real secret loses the secret."""
    assert redact(usage) == (usage, [])
    out, findings = redact(real)
    assert findings and all(real[f.start:f.end] not in out for f in findings)


def test_every_rule_in_the_docs_table_is_one_of_the_code_with_its_keywords():
    """docs/redact.md's table names no rule the code lacks, and its keywords column lists the rule's keywords (all of
    them, or some then `…`)."""
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parent.parent / "docs" / "redact.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z0-9-]+)` \| .* \| ([^|]*) \|$", docs, re.M)}
    by_id = {rule.id: rule for rule in RULES}
    assert len(rows) >= 40 and sorted(set(rows) - set(by_id)) == []
    for rule_id, cell in rows.items():
        listed = set(re.findall(r"`([^`]+)`", cell))
        keywords = set(by_id[rule_id].keywords)
        assert listed <= keywords and (listed == keywords or "…" in cell), (rule_id, listed, keywords)
