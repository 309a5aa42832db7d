"""Credentials in the places people paste them, and ordinary technical text that must stay as it is.

Every secret is built at run time from a provider's documented shape (a prefix, a length, an alphabet) and a
seeded random body, so the repository holds no token string that a push-protection scanner would stop, and
every run plants the same values. ``credential_cases`` is the leak corpus (tests/test_redaction_corpus.py
asserts none of them survives anywhere; benchmarks/redaction.py counts them); ``ordinary_texts`` is the
false-positive corpus: git SHAs, UUIDs, digests, data URIs, long URLs, stack traces, versions, colours, paths,
code with secret-sounding variable names and log lines.
"""

from __future__ import annotations

import base64
import hashlib
import random
import re
import string
import uuid
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


@dataclass(frozen=True)
class Case:
    """One credential in context: ``secret`` must not appear in anything stored, indexed, sent or recalled."""

    shape: str
    text: str
    secret: str


class _Maker:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def chars(self, n: int, alphabet: str = ALNUM) -> str:
        # At least one digit and one letter where the alphabet has both, as generated keys do.
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            mixed = any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            if mixed or not (set(alphabet) & set(string.digits)) or not (set(alphabet) & set(string.ascii_letters)):
                return value

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def password(self) -> str:
        words = ["Maple", "river", "Orbit", "cactus", "Velvet", "tundra", "Copper", "lagoon"]
        return f"{self.rng.choice(words)}-{self.rng.choice(words)}{self.rng.randint(10, 99)}!"

    def pem_body(self) -> str:
        return "\n".join(self.chars(64, B64) for _ in range(4))


def present(secret: str, text: str) -> bool:
    """The secret as a whole token: a 4-digit PIN must not match the digits of a score, a port or a time."""
    return re.search(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", text) is not None


def credential_cases(seed: int = 13) -> list[Case]:
    """More than sixty credential shapes, each in a realistic line (env file, config, command, sentence)."""
    m = _Maker(seed)
    c = m.chars
    cases: list[Case] = []

    def add(shape: str, text: str, secret: str) -> None:
        assert secret in text, shape
        cases.append(Case(shape, text, secret))

    # -- provider tokens, bare or in context ------------------------------------------------------------------
    s = "sk-proj-" + c(48, URLSAFE)
    add("openai_project_key", f"here's the key for the script: {s}", s)
    s = "sk-" + c(48)
    add("openai_legacy_key", f"OPENAI_API_KEY={s}", s)
    s = "sk-ant-api03-" + c(93, URLSAFE) + "AA"
    add("anthropic_key", f"export ANTHROPIC_API_KEY='{s}'", s)
    s = "gsk_" + c(52)
    add("groq_key", f'groq client = Groq(api_key="{s}")', s)
    s = "hf_" + c(34, string.ascii_letters)
    add("huggingface_token", f"huggingface-cli login --token {s}", s)
    s = "r8_" + c(37)
    add("replicate_token", f"REPLICATE_API_TOKEN={s} python run.py", s)
    s = "pplx-" + c(48)
    add("perplexity_key", f"perplexity: {s}", s)
    s = "xai-" + c(80)
    add("xai_key", f"use {s} for grok", s)
    s = "AIza" + c(35, URLSAFE)
    add("google_api_key", f"https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={s}", s)
    s = "ya29." + c(120, URLSAFE)
    add("google_oauth_token", f"access token: {s}", s)
    s = "GOCSPX-" + c(28, URLSAFE)
    add("google_client_secret", f'{{"client_id": "1234.apps.googleusercontent.com", "client_secret": "{s}"}}', s)
    s = "ghp_" + c(36)
    add("github_pat_classic", f"git remote set-url origin https://{s}@github.com/acme/api.git", s)
    s = "github_pat_11" + c(20, UPPER_ALNUM) + "_" + c(59)
    add("github_pat_fine", f"GH_TOKEN={s} gh pr list", s)
    s = "ghs_" + c(36)
    add("github_app_token", f"git clone https://x-access-token:{s}@github.com/acme/infra.git", s)
    s = "glpat-" + c(20, URLSAFE)
    add("gitlab_pat", f'curl --header "PRIVATE-TOKEN: {s}" https://gitlab.example.com/api/v4/projects', s)
    s = "ATBB" + c(28)
    add("bitbucket_app_password", f"bitbucket app password {s}", s)
    s = "AKIA" + c(16, BASE32)
    add("aws_access_key_id", f"[default]\naws_access_key_id = {s}", s)
    s = c(40, B64)
    add("aws_secret_access_key", f"aws_secret_access_key = {s}", s)
    s = "xoxb-" + "".join(m.chars(12, string.digits)) + "-" + m.chars(13, string.digits) + "-" + c(24)
    add("slack_bot_token", f"SLACK_BOT_TOKEN: {s}", s)
    s = "T0" + c(9, UPPER_ALNUM) + "/B0" + c(9, UPPER_ALNUM) + "/" + c(24)
    add("slack_webhook", f'curl -X POST https://hooks.slack.com/services/{s} -d \'{{"text":"hi"}}\'', s)
    s = m.chars(18, string.digits) + "/" + c(68, URLSAFE)
    add("discord_webhook", f"webhook: https://discord.com/api/webhooks/{s}", s)
    s = m.chars(10, string.digits) + ":AA" + c(33, URLSAFE)
    add("telegram_bot_token", f"the bot token from BotFather is {s}", s)
    s = m.chars(10, string.digits) + ":AA" + c(33, URLSAFE)
    add("telegram_bot_url", f"curl https://api.telegram.org/bot{s}/sendMessage?chat_id=42", s)
    s = "sk_live_" + c(99)
    add("stripe_secret_key", f"Stripe.api_key = '{s}'", s)
    s = "whsec_" + c(32)
    add("stripe_webhook_secret", f"STRIPE_WEBHOOK_SECRET={s}", s)
    s = "SG." + c(22, URLSAFE) + "." + c(43, URLSAFE)
    add("sendgrid_key", f"sendgrid {s}", s)
    s = "SK" + c(32, HEX)
    add("twilio_api_key", f"twilio api key sid {s}", s)
    s = "npm_" + c(36)
    add("npm_token", f"//registry.npmjs.org/:_authToken={s}", s)
    s = "pypi-AgEIcHlwaS5vcmc" + c(70, URLSAFE)
    add("pypi_token", f"[pypi]\n  username = __token__\n  password = {s}", s)
    s = "dckr_pat_" + c(27, URLSAFE)
    add("docker_hub_pat", f"echo {s} | docker login -u acme --password-stdin", s)
    s = "dop_v1_" + c(64, HEX)
    add("digitalocean_token", f"doctl auth init -t {s}", s)
    s = "shpat_" + c(32, HEX)
    add("shopify_token", f"X-Shopify-Access-Token: {s}", s)
    s = "lin_api_" + c(40)
    add("linear_key", f"LINEAR_API_KEY={s}", s)
    s = "ntn_" + m.chars(11, string.digits) + c(35)
    add("notion_token", f"notion integration secret {s}", s)
    s = "hvs." + c(90, URLSAFE)
    add("vault_token", f"export VAULT_TOKEN={s}", s)
    s = "dapi" + c(32, HEX)
    add("databricks_token", f"databricks configure --token {s}", s)
    s = "glsa_" + c(32) + "_" + c(8, HEX)
    add("grafana_service_account", f"grafana token {s}", s)
    s = "NRAK-" + c(27, UPPER_ALNUM)
    add("newrelic_key", f"NEW_RELIC_API_KEY: {s}", s)
    s = "pcsk_" + c(5) + "_" + c(60)
    add("pinecone_key", f"pc = Pinecone(api_key='{s}')", s)
    s = c(3, ALNUM) + "8Q~" + c(34, URLSAFE + "~.")
    add("azure_client_secret", f'"clientSecret": "{s}"', s)
    s = c(32, HEX) + "-us" + str(m.rng.randint(1, 21))
    add("mailchimp_key", f"mailchimp key {s}", s)
    s = "rzp_live_" + c(14)
    add("razorpay_key", f"razorpay key_id {s}", s)
    s = "AGE-SECRET-KEY-1" + "".join(m.rng.choice("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L") for _ in range(58))
    add("age_secret_key", f"# created: 2024-01-01\n{s}", s)

    # -- signed tokens and key blocks -------------------------------------------------------------------------
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(b'{"sub":"42","name":"Ada","iat":1700000000}').decode().rstrip("=")
    s = f"{header}.{payload}.{c(43, URLSAFE)}"
    add("jwt", f"session cookie value was {s}", s)
    body = m.pem_body()
    add("rsa_private_key", f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----", body)
    body = m.pem_body()
    add("openssh_private_key", f"cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n", body)
    body = m.pem_body()
    private = f"-----BEGIN PRIVATE KEY-----\\n{body.replace(chr(10), '')}\\n-----END PRIVATE KEY-----\\n"
    add("gcp_service_account", f'{{"type": "service_account", "private_key": "{private}"}}', body[:64])

    # -- generic: names that say secret, in every syntax ------------------------------------------------------
    s = c(32)
    add("env_token_no_prefix", f"INTERNAL_SERVICE_TOKEN={s}", s)
    s = c(24, LOWER_ALNUM)
    add("env_secret_no_prefix", f"SESSION_SECRET={s}\nPORT=3000", s)
    s = m.password()
    add("env_password", f"POSTGRES_PASSWORD={s}", s)
    s = c(40, B64)
    add("env_key", f"export PAYMENTS_SIGNING_KEY={s}", s)
    s = c(28)
    add("yaml_api_key", f"service:\n  name: billing\n  api_key: {s}\n", s)
    s = m.password()
    add("yaml_password_quoted", f'database:\n  user: app\n  password: "{s}"\n', s)
    s = c(36)
    add("json_token", f'{{"endpoint": "https://api.example.com", "accessToken": "{s}"}}', s)
    s = c(30)
    add("toml_secret", f'[auth]\nclient_secret = "{s}"', s)
    s = m.password()
    add("ini_password", f"[mysql]\nhost = db1\npassword = {s}\n", s)
    s = m.password()
    add("xml_password", f"<server><id>nexus</id><username>deploy</username><password>{s}</password></server>", s)
    s = c(32)
    add("dotnet_appsetting", f'<add key="PaymentApiKey" value="{s}" />', s)
    s = c(26)
    add("powershell_env", f'$env:BUILD_TOKEN = "{s}"', s)
    s = c(30)
    add("dockerfile_env", f"ENV REGISTRY_AUTH_TOKEN={s}", s)
    s = c(22)
    add("k8s_literal", f"kubectl create secret generic db --from-literal=password={s}", s)
    s = c(24)
    add("php_define", f"define('DB_PASSWORD', '{s}');", s)
    s = c(32)
    add("android_strings_xml", f'<string name="maps_api_key">{s}</string>', s)
    s = c(36)
    add("npm_config_set", f"npm config set //npm.example.com/:_authToken {s}", s)
    s = c(64, HEX)
    add("rails_secret_key_base", f"production:\n  secret_key_base: {s}", s)
    s = c(30)
    add("python_environ_set", f'os.environ["PAYMENTS_API_TOKEN"] = "{s}"', s)
    s = c(34)
    add("az_login_p", f"az login --service-principal -u app-id -p {s} --tenant acme", s)
    s = m.password()
    add("prose_bare_pass", f"wifi: HomeNet / pass {s.replace('!', '9')}", s.replace("!", "9"))
    s = base64.b64encode(f"deploy:{m.password()}".encode()).decode()
    add("docker_config_auth", f'{{"auths": {{"registry.example.com": {{"auth": "{s}"}}}}}}', s)
    s = c(40)
    add("escaped_json_in_tool_output", f'{{\\"apiKey\\": \\"{s}\\", \\"region\\": \\"eu\\"}}', s)

    # -- connection strings and URLs --------------------------------------------------------------------------
    s = c(86, B64) + "=="
    conn = f"DefaultEndpointsProtocol=https;AccountName=acmestore;AccountKey={s};EndpointSuffix=core.windows.net"
    add("azure_storage_connection", conn, s)
    s = c(43, B64) + "="
    conn = (
        f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={s}"
    )
    add("azure_service_bus", conn, s)
    s = m.password()
    add("sqlserver_connection", f"Server=tcp:sql1,1433;Database=app;User Id=sa;Password={s};Encrypt=true;", s)
    s = c(20)
    add("postgres_url", f"DATABASE_URL=postgres://app:{s}@db.internal:5432/app", s)
    s = c(24)
    add("redis_url_no_user", f"REDIS_URL=redis://:{s}@cache.internal:6379/0", s)
    s = c(16)
    add("url_empty_user", f"open https://:{s}@nas.home.lan/share", s)
    s = c(18)
    add("mongodb_srv", f'MongoClient("mongodb+srv://admin:{s}@cluster0.ab1cd.mongodb.net/?retryWrites=true")', s)
    s = c(20)
    add("amqp_url", f"amqp://guest:{s}@rabbit:5672/", s)
    s = c(44, URLSAFE)
    add("url_query_token", f"GET https://api.example.com/v2/export?format=csv&access_token={s}&page=2", s)
    s = "sv=2022-11-02&ss=b&srt=sco&sp=rl&se=2026-01-01T00:00:00Z&sig=" + c(43, B64).replace("/", "%2F") + "%3D"
    add("azure_sas_url", f"https://acme.blob.core.windows.net/backups?{s}", s.split("sig=")[1])

    # -- HTTP headers of every scheme -------------------------------------------------------------------------
    s = base64.b64encode(f"admin:{m.password()}".encode()).decode()
    add("basic_auth_header", f"curl -H 'Authorization: Basic {s}' https://ci.example.com/api", s)
    s = c(40, HEX)
    add("token_scheme_header", f"Authorization: token {s}", s)
    s = c(32, HEX)
    digest = f'Digest username="ops", realm="api", nonce="{c(16, HEX)}", uri="/x", response="{s}"'
    add("digest_auth_header", f"Authorization: {digest}", s)
    s = c(64, HEX)
    add(
        "aws_sigv4_header",
        f"Authorization: AWS4-HMAC-SHA256 Credential=AKIA{c(16, BASE32)}/20240101/us-east-1/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={s}",
        s,
    )
    s = c(36, URLSAFE)
    add("custom_scheme_header", f"Authorization: SSWS {s}", s)
    s = c(32)
    add("bearer_in_python", f'headers = {{"Authorization": f"Bearer {s}"}}', s)
    s = c(32)
    add("x_api_key_header", f'curl https://api.example.com -H "X-Api-Key: {s}"', s)
    s = c(40, URLSAFE)
    add("cookie_header", f"Cookie: theme=dark; sessionid={s}; csrftoken=abc", s)

    # -- command lines ----------------------------------------------------------------------------------------
    s = m.password().replace("!", "")
    add("mysql_p_attached", f"mysql -h db1 -u root -p{s} app_production", s)
    s = m.password().replace("!", "")
    add("mysql_p_separate", f"mysqldump -u backup -p {s} --all-databases > dump.sql", s)
    s = m.password()
    add("flag_password_equals", f"pg_dump --dbname=app --password={s}", s)
    s = c(40)
    add("flag_token", f"terraform login --token {s}", s)
    s = c(32)
    add("flag_api_key", f"./deploy.sh --env prod --api-key {s}", s)
    s = m.password()
    add("curl_user_password", f"curl -u admin:{s} https://jenkins.example.com/api/json", s)
    s = m.password()
    add("sshpass", f"sshpass -p '{s}' ssh deploy@10.0.0.5", s)
    s = c(24)
    add("redis_cli_a", f"redis-cli -h cache -a {s} ping", s)
    s = m.password()
    add("docker_login_p", f"docker login -u ci -p {s} registry.example.com", s)
    s = m.password()
    add("pgpassword_env", f"PGPASSWORD='{s}' psql -h db -U app", s)

    # -- plain sentences --------------------------------------------------------------------------------------
    s = "hunter2-Blue-" + str(m.rng.randint(10, 99))
    add("prose_wifi_password", f"btw the wifi password is {s} if you need it", s)
    s = c(32, HEX)
    add("prose_api_key", f"here is my api key {s} please keep it safe", s)
    s = "".join(m.rng.choice(string.ascii_lowercase) for _ in range(9))
    add("prose_lowercase_password", f"My password: {s}", s)
    s = c(20)
    add("prose_token_for", f"The token for the staging cluster is {s}.", s)
    s = str(m.rng.randint(1000, 9999))
    add("prose_pin", f"my bank card PIN is {s}, don't tell anyone", s)
    s = c(26)
    add("prose_secret_colon", f"Client secret: {s}", s)
    s = m.password()
    add("prose_password_for", f"the password for the router admin page is {s}", s)
    s = c(40, B64)
    add("prose_credentials", f"use these credentials -> {s}", s)
    return cases


def ordinary_texts(seed: int = 7) -> list[str]:
    """Technical messages with no secret in them: each one must come out of redaction unchanged."""
    m = _Maker(seed)
    c = m.chars
    sha1 = [hashlib.sha1(str(i).encode(), usedforsecurity=False).hexdigest() for i in range(8)]
    sha256 = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(6)]
    pixel = base64.b64encode(bytes(m.rng.getrandbits(8) for _ in range(300))).decode()
    return [
        f"fixed in commit {sha1[0]} on main",
        f"git log --oneline shows {sha1[1][:7]} Refactor the parser and {sha1[2][:7]} Add tests",
        f"git cherry-pick {sha1[3]}",
        f"merge {sha1[4][:12]}..{sha1[5][:12]} into release/2.4",
        f"request id {m.uuid()} failed after 3 retries",
        f"user {m.uuid()} joined org {m.uuid()}",
        f"sha256sum: {sha256[0]}  openclaw-lossless-0.1.0.tar.gz",
        f"docker pull python@sha256:{sha256[1]}",
        f"integrity sha512-{base64.b64encode(hashlib.sha512(b'x').digest()).decode()}",
        f'<img src="data:image/png;base64,{pixel}" alt="logo">',
        f"background: url(data:image/gif;base64,{pixel[:120]});",
        "https://www.google.com/search?q=sqlite+fts5+tokenizer&oq=sqlite+fts5&sourceid=chrome&ie=UTF-8",
        "https://github.com/acme/api/blob/4f2b9c1/src/server/routes/users.ts#L120-L145",
        f"https://github.com/acme/api/commit/{sha1[6]}",
        "https://example.com/callback?state=af0ifjsldkj&code_challenge_method=S256&redirect_uri=https%3A%2F%2Fapp",
        "https://cdn.example.com/assets/app.3f9a1c2e.js?v=20240101&utm_source=newsletter&utm_medium=email",
        'Traceback (most recent call last):\n  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 1013',
        '  File "/app/services/auth.py", line 88, in refresh_token\n    token = self._client.post(url).json()["t"]',
        "KeyError: 'password'",
        'java.lang.NullPointerException: Cannot invoke "String.length()" because "token" is null',
        "    at com.acme.auth.TokenService.validate(TokenService.java:142)",
        "npm WARN deprecated request@2.88.2: request has been deprecated",
        "pip install fastapi==0.110.0 uvicorn[standard]>=0.29 pydantic-settings~=2.2",
        "Successfully installed numpy-1.26.4 onnxruntime-1.17.1 tokenizers-0.15.2",
        "color: #1e90ff; border: 1px solid #ccc; background-color: #FAFAFA;",
        "theme colours: primary #4F46E5, accent #22D3EE, danger #DC2626",
        "/home/dev/projects/api/src/auth/password_reset.py",
        r"C:\Users\dev\AppData\Local\Programs\Python\Python311\python.exe",
        "~/.ssh/id_ed25519.pub and ~/.ssh/known_hosts",
        "token_count = 5",
        "max_tokens: 1024",
        "password_field = forms.CharField(widget=forms.PasswordInput)",
        "api_key = os.environ['OPENAI_API_KEY']",
        'secret = os.getenv("APP_SECRET")',
        "password = getpass.getpass()",
        "if not token:\n    raise AuthError('missing token')",
        "const apiKey = process.env.STRIPE_KEY;",
        "def verify_password(password: str, hashed: str) -> bool:",
        "token = tokenizer.encode(text)",
        'cache_key = f"user:{user_id}:profile"',
        "sort_key = lambda item: item.priority",
        "primary_key=True, max_length=64",
        "password: ${DB_PASSWORD}",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "api_key: <your-api-key>",
        "2024-05-01T12:00:03.118Z INFO  auth: token refreshed for user=42 in 183ms",
        "2024-05-01 12:00:04,220 WARNING password policy requires 12 characters",
        "[2024-05-01 12:00:05] ERROR invalid api key format (expected prefix)",
        "GET /api/v1/users?page=3&per_page=50 200 12.4ms",
        '127.0.0.1 - - [01/May/2024:12:00:06 +0000] "POST /login HTTP/1.1" 302 0',
        "version 2.14.3-beta.2+build.7781 released",
        "node v20.11.1, npm 10.2.4, python 3.11.7",
        "The key insight is that the cache is keyed by tenant.",
        "What's the password policy for the staging environment?",
        "I forgot my password again, can you reset it?",
        "The password is stored hashed with argon2id.",
        "Tokens are counted with tiktoken; the budget is 8192 tokens.",
        "Use the secret manager instead of hard-coding credentials.",
        "keys: [id, created_at, updated_at]",
        "mysql -u root -p",
        "docker run -u 1000:1000 -v $PWD:/app node:20 npm test",
        "ssh -i ~/.ssh/deploy_key deploy@203.0.113.10 -p 2222",
        "curl -H 'Authorization: Bearer $TOKEN' https://api.example.com/me",
        "kubectl get secret db-credentials -o yaml",
        "awk -F: '{print $1}' /etc/passwd",
        f"object id 0x{c(12, HEX)} at address {c(8, HEX)}",
        f'etag: W/"{c(32, HEX)}"',
        f"build hash {c(20, HEX)} uploaded to s3://acme-artifacts/builds/",
        "ISBN 978-0-13-468599-1, DOI 10.1145/3386569.3392408",
        "coordinates 52.520008, 13.404954; timezone Europe/Berlin",
        "SELECT id, email FROM users WHERE password_hash IS NULL LIMIT 10;",
        "ALTER TABLE api_keys ADD COLUMN last_used_at TIMESTAMP;",
        "The bearer of this letter is my colleague.",
        "Authorization is handled by the gateway; see docs/auth.md.",
        "function getToken() { return localStorage.getItem('token'); }",
        "export PATH=$HOME/.local/bin:$PATH",
        "AWS_REGION=eu-central-1",
        "LOG_LEVEL=debug\nPORT=8080\nNODE_ENV=production",
        f"trace_id={c(32, HEX)} span_id={c(16, HEX)}",
        "the key takeaway from the retro: ship smaller PRs",
        "press the Enter key twice and then Ctrl+C",
        "my PIN code reminder is on the fridge",
        "My password was hacked last week, so I changed it.",
        "the API key is invalid, please rotate it",
        "Passwords must be at least 12 characters long.",
        "What is your password policy?",
        "passwords are hashed with bcrypt before they are stored",
        "the token expired yesterday at 17:00",
    ]
