"""The secrets filter's corpus: code and prose that must pass untouched, and secrets that must be cut.

Written for this repository. The texts to keep are the kind a user pastes into a project chat: code in Python, JS/TS,
SQL, YAML, shell, Go and Java whose password, token and secret variables hold expressions, subscripts, calls,
environment look-ups and templates; placeholders from docs and tutorials; headings and sentences about passwords;
version numbers, UUIDs, commit SHAs, digests and hashes (a hash is not a credential: nobody logs in with it, and
cutting it breaks the code it sits in). The secrets are vendor keys, labelled passwords in prose and in code literals,
.env lines, card numbers, IBANs, private key blocks, JWTs, URL credentials, bearer and basic tokens, PINs.

Key-shaped secrets are generated at import from a seeded generator, so the repository holds no string that looks like a
live credential; cards and IBANs come from Faker (seeded), and carry valid check digits.
"""
from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Keep:
    family: str
    text: str


@dataclass(frozen=True)
class Secret:
    kind: str
    secret: str  # what must not survive
    text: str


KEEP: list[Keep] = [Keep(family, text) for family, text in [
    # --- the three cases
    ("python", 'password = request.form["password"]'),
    ("python", 'token = jwt.encode({"sub": user.id}, settings.SECRET_KEY, algorithm="HS256")'),
    ("markdown", "4. **Secure Password Storage**: hash passwords with bcrypt before they reach the database."),
    # --- Python
    ("python", 'api_key = os.environ["API_KEY"]'),
    ("python", 'SECRET_KEY = os.getenv("DJANGO_SECRET_KEY")'),
    ("python", "password = getpass.getpass()"),
    ("python", 'user.set_password(form.cleaned_data["password1"])'),
    ("python", "if not check_password_hash(user.password_hash, password):\n    abort(401)"),
    ("python", "hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(12))"),
    ("python", 'app.config["SECRET_KEY"] = os.environ.get("SECRET_KEY")'),
    ("python", "app.config['JWT_SECRET_KEY'] = 'your-secret-key'"),
    ("python", 'db_password = settings.DATABASES["default"]["PASSWORD"]'),
    ("python", 'token = request.headers.get("Authorization", "").removeprefix("Bearer ")'),
    ("python", "class LoginForm(forms.Form):\n    password = forms.CharField(widget=forms.PasswordInput)"),
    ("python", "password: str = Field(..., min_length=12)\ntoken: Optional[str] = None"),
    ("python", 'access_token = create_access_token(identity=user.id, expires_delta=timedelta(minutes=15))'),
    ("python", "refresh_token = secrets.token_urlsafe(32)"),
    ("python", "get_password = (lambda: password) if password else None"),
    ("python", 'raise ValueError("Password was given but private key is not encrypted.")'),
    ("shell", "SECRET_KEY=$(openssl rand -hex 32)"),
    ("python", 'client_secret = vault.read("secret/data/oauth")["data"]["client_secret"]'),
    ("python", "def login(username: str, password: str) -> Token:\n    ..."),
    ("python", 'raise ValueError(f"Invalid token: {token!r}")'),
    ("python", 'logger.info("password reset requested for %s", user.email)'),
    ("python", 'password = "{password}".format(password=generated)'),
    ("python", 'DATABASE_URL = f"postgresql://{DB_USER}:{DB_PASSWORD}@{DB_HOST}:5432/app"'),
    ("python", "engine = create_engine('postgresql://user:password@localhost:5432/mydb')"),
    ("python", 'stripe.api_key = os.environ["STRIPE_SECRET_KEY"]'),
    ("python", "max_tokens=4096, temperature=0.2"),
    ("python", "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')\nstopwords = ['token', 'key']"),
    ("python", 'test_user = User(email="ada@example.com", password="password123")'),
    ("python", "self.client.login(username='alice', password='testpass')"),
    ("python", 'TOTP_SECRET = pyotp.random_base32()'),
    ("python", 'password_hash = "$2b$12$KIXQJQ8mZ5Wn1Q3zV9m4eOq0cJ6bH2sZ0a1pLrT7yX4vN8dW3eF5G"'),
    # --- JavaScript / TypeScript
    ("js", "const token = req.headers.authorization?.split(' ')[1];"),
    ("js", "const secretKey = process.env.JWT_SECRET_KEY;"),
    ("js", "const token = localStorage.getItem('token');"),
    ("js", "const { password, ...rest } = user.toObject();"),
    ("js", "password: await bcrypt.hash(password, 10),"),
    ("js", "const userSchema = new mongoose.Schema({\n  username: String,\n"
           "  password: { type: String, required: true },\n});"),
    ("js", "headers: { Authorization: `Bearer ${token}` },"),
    ("js", "headers: { Authorization: 'Bearer ' + accessToken },"),
    ("js", "const secretKey = 'your_secret_key'; // replace with your own"),
    ("js", "jwt.verify(token, process.env.JWT_SECRET!, (err, decoded) => next(err));"),
    ("js", "interface Credentials {\n  username: string;\n  password?: string;\n  token: string | null;\n}"),
    ("js", "if (password !== confirmPassword) {\n  setError('Passwords do not match');\n}"),
    ("js", "const io = require('socket.io')({ pingTimeout: 25000, pingInterval: 20000 });"),
    ("js", "await page.fill('#password', process.env.E2E_PASSWORD);"),
    ("js", "axios.post('/login', { username: 'demo', password: 'demo' })"),
    ("js", '<input type="password" name="password" placeholder="Password" autocomplete="current-password">'),
    ("js", '<label for="password">Password:</label>'),
    ("js", "const resetLink = `${process.env.FRONTEND_URL}/reset-password/${resetToken}`;"),
    ("js", "mongoose.connect('mongodb://<username>:<password>@cluster0.mongodb.net/app');"),
    # --- SQL
    ("sql", "CREATE TABLE users (\n  id SERIAL PRIMARY KEY,\n  password VARCHAR(255) NOT NULL,\n  token TEXT\n);"),
    ("sql", "SELECT id, password_hash FROM users WHERE email = $1;"),
    ("sql", "UPDATE users SET password = crypt($1, gen_salt('bf')) WHERE id = $2;"),
    ("sql", "SELECT * FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL;"),
    ("sql", "ALTER TABLE sessions ADD COLUMN refresh_token_expires_at TIMESTAMPTZ;"),
    # --- YAML, .env templates, Docker
    ("yaml", "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n"
             "        name: db-secret\n        key: password"),
    ("yaml", "steps:\n  - run: deploy\n    env:\n      API_KEY: ${{ secrets.API_KEY }}\n"
             "      password: ${{ secrets.DOCKERHUB_TOKEN }}"),
    ("yaml", 'db:\n  password: "{{ vault_db_password }}"\n  user: app'),
    ("yaml", "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  623133653966623430613934643361633837"),
    ("yaml", "services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: postgres"),
    ("yaml", "environment:\n  - POSTGRES_PASSWORD=${POSTGRES_PASSWORD:-postgres}\n"
             "  - GF_SECURITY_ADMIN_PASSWORD=admin"),
    ("env", "DB_PASSWORD=changeme\nSECRET_KEY=your-secret-key-here\nAPI_TOKEN=\n"
            "JWT_SECRET=<generate with openssl rand -hex 32>"),
    ("env", "RESUME_ANALYZER_SECRET_KEY=my_secret_key\nMAIL_PASSWORD=mypassword1"),
    ("env", "DATABASE_URL=postgresql://user:password@db:5432/database"),
    ("docker", "ENV LD_LIBRARY_PATH=/usr/local/cuda-11.7/lib64:$LD_LIBRARY_PATH"),
    # --- shell
    ("shell", 'export DATABASE_URL="postgres://${DB_USER}:${DB_PASSWORD}@localhost/app"'),
    ("shell", 'read -s -p "Password: " PASSWORD'),
    ("shell", 'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me'),
    ("shell", 'echo "$GITHUB_TOKEN" | gh auth login --with-token'),
    ("shell", 'mysql -u root -p"$MYSQL_ROOT_PASSWORD" app < dump.sql'),
    ("shell", "docker login -u ci --password-stdin < token.txt"),
    ("shell", "openssl rand -hex 32  # generates a secret key"),
    # --- Go, Java
    ("go", 'type User struct {\n\tPassword string `json:"password"`\n\tToken    string `json:"token,omitempty"`\n}'),
    ("go", "token, err := auth.NewToken(user.ID)\nif err != nil {\n\treturn err\n}"),
    ("java", 'String password = request.getParameter("password");'),
    ("java", 'private static final String TOKEN_HEADER = "Authorization";'),
    # --- headings and prose about credentials
    ("markdown", "## Secure Password Storage\n\nNever store passwords in plain text."),
    ("markdown", "### Step 2: JWT Token Validation Errors"),
    ("markdown", "1. **Token Verification Middleware**: checks the signature on every request."),
    ("markdown", "- **Password Hashing**: use bcrypt with a cost of 12.\n- **Access Token**: Double-check the expiry."),
    ("markdown", "- `password`: the user's password, at least 12 characters."),
    ("markdown", "| field | type | notes |\n|---|---|---|\n| password | string | The user's password |"),
    ("prose", "My password is weak, I know."),
    ("prose", "The password is hashed with bcrypt before it is stored."),
    ("prose", "Your password must be at least 12 characters long."),
    ("prose", "Password: at least 12 characters, one digit."),
    ("prose", "The token is invalid or expired, so the user has to log in again."),
    ("prose", "Token expiry: 15 minutes for access tokens, 7 days for refresh tokens."),
    ("prose", "The API key is stored in AWS Secrets Manager."),
    ("prose", "I rotated the secret yesterday and the deploy went fine."),
    ("prose", "I forgot my password again, can you remind me how the reset flow works?"),
    ("prose", "The password was incorrect."),
    ("prose", "The password to the wifi is on the fridge."),
    ("prose", "password123 is a terrible password, and so is P@ssw0rd."),
    ("prose", "Changed my password yesterday because it expired."),
    ("prose", "The secret to good bread is time."),
    ("prose", "The token limit is 4096 and the budget is 1,000 tokens per turn."),
    ("prose", "Use PIN 13 on the Raspberry Pi for the LED."),
    ("prose", "My zip code is 94103 and the status code was 404."),
    ("prose", "Basic example: a Flask app with a login page."),
    ("prose", "The bearer token goes in the Authorization header."),
    # --- numbers, ids, digests and hashes
    ("ids", "Upgraded to Django 5.0.6, psycopg 3.1.19 and Node v18.17.1; Tailwind CSS v3.3.2."),
    ("ids", "request id 3f2b8c1e-9a4d-4e2b-8c1f-2d3e4f5a6b7c failed after 0.0048812345678901234s"),
    ("ids", "The fix landed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 on main."),
    ("ids", "image: app@sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
    ("ids", '<script src="https://cdn.example.net/lib.min.js" integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9r'
            'x7HNQlGYl1kPzQho1wx4JwY8wC" crossorigin="anonymous"></script>'),
    ("ids", "previous_etag = 'd41d8cd98f00b204e9800998ecf8427e'"),
    ("ids", "arn:aws:elasticloadbalancing:us-west-2:123456789012:targetgroup/my-targets/73e2d6bc24d8a067"),
    ("ids", "Traceback (most recent call last):\n  File \"app.py\", line 42, in <module>\n"
            "jwt.exceptions.InvalidSignatureError: Signature verification failed at 0x7f3b2c1d9e80"),
    ("ids", "pod web-7d4b9c8f6d-x2k9p restarted 3 times; node ip-10-0-12-34.ec2.internal"),
    ("ids", "<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
            "60e6kgAAAABJRU5ErkJggg==\">"),
    ("ids", "elif isinstance(e, jwt.InvalidClaimValueRestrictionError):"),
    ("ids", "Order 12345678 shipped; call 555 0100 tomorrow."),
    ("ids", "epoch 1684360800000 ms, port 5432, color #ff00aa"),
    ("ids", "see https://doi.org/10.1016/S0012365X04001955 and https://web.archive.org/web/20170809091249/https://a.org"),
    ("ids", "# lanes 00 01 02 03 04 05 06 07 | 08 09 10 11 12 13 14 15"),
    ("ids", "ranges = [0x1076000010768, 0x10780000107b1]"),
    ("ids", "rng = np.random.default_rng(2435908729190400)\nseeds = [4220315081820346526, 7177518203184491332]"),
    ("ids", 'FONT = b"""\niVBORw0KGgoAAAANSUhEUgAAAx4AAAAUAQAAAAArMtZoAAAEwElEQVR4nABlAJr/AHVE4czCI/4u\n"""'),
    ("ids", "https://groups.google.com/g/django-developers/c/zwQju7hbG78/m/9l934yelwfsJ"),
    ("ids", "class Qwen2_5_VLCausalLMOutputWithPast(ModelOutput):"),
    ("ids", '<span class="sk-toggleable__label-arrow"></span>'),
    ("ids", '<assemblyIdentity name="Microsoft.VC90.CRT" publicKeyToken="1fc8b3b9a1e18e3b"/>'),
    ("ids", 'url = "git://[path-to-repo[:]][ref@]path/to/file"'),
    # --- documented public examples, never live
    ("example", '"principalId": "AKIAIOSFODNN7EXAMPLE"'),
    ("example", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("example", "const token = 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6Ikpv"
                "aG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';"),
    ("example", "webhook_url = 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'"),
    ("example", 'OPENAI_API_KEY=sk-...\nANTHROPIC_API_KEY=sk-ant-xxxxxxxxxxxxxxxxxxxxxxxx'),
    ("example", '"totp_secret": "JBSWY3DPEHPK3PXP"'),
    ("example", "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----"),
    ("example", 'headers = {"Authorization": "Bearer YOUR_ACCESS_TOKEN"}'),
]]


_SEED = 20240517
_rng = random.Random(_SEED)
_ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _hex(n: int) -> str:
    return _rand(n, "0123456789abcdef")


def _b64url(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _jwt() -> str:
    header = _b64url('{"alg":"HS256","typ":"JWT"}')
    payload = _b64url('{"sub":"%d","exp":%d}' % (_rng.randint(1, 10**6), _rng.randint(1_700_000_000, 1_800_000_000)))
    return f"{header}.{payload}.{_rand(43, _ALNUM + '_-')}"


def _pem(kind: str) -> str:
    label = f"{kind} PRIVATE KEY" if kind else "PRIVATE KEY"
    body = "\n".join(_rand(64, _ALNUM + "+/") for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _faker_cards_and_ibans() -> tuple[list[str], list[str]]:
    from faker import Faker

    fake = Faker(["en_US", "de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT", "en_GB"])
    fake.seed_instance(55)
    cards = [fake["en_US"].credit_card_number(t) for t in ("visa16", "mastercard", "amex", "discover", "jcb16")]
    ibans = [fake[loc].iban() for loc in ("de_DE", "fr_FR", "nl_NL", "es_ES", "it_IT", "en_GB")]
    return cards, ibans


def _spaced(number: str, sep: str = " ") -> str:
    return sep.join(number[i:i + 4] for i in range(0, len(number), 4))


def secrets() -> list[Secret]:
    """The same list on every call (the generator is seeded again)."""
    _rng.seed(_SEED)
    cards, ibans = _faker_cards_and_ibans()
    vendor = {
        "openai": f"sk-proj-{_rand(48, _ALNUM + '_-')}",
        "openai_legacy": f"sk-{_rand(48)}",
        "anthropic": f"sk-ant-api03-{_rand(93, _ALNUM + '_-')}",
        "stripe": f"sk_live_{_rand(24)}",
        "stripe_restricted": f"rk_live_{_rand(24)}",
        "stripe_webhook": f"whsec_{_rand(32)}",
        "aws": f"AKIA{_rand(16, string.ascii_uppercase + string.digits)}",
        "github": f"ghp_{_rand(36)}",
        "github_fine": f"github_pat_{_rand(22)}_{_rand(59)}",
        "gitlab": f"glpat-{_rand(20, _ALNUM + '_-')}",
        "slack": f"xoxb-{_rand(12, string.digits)}-{_rand(13, string.digits)}-{_rand(24)}",
        "slack_webhook": f"https://hooks.slack.com/services/T{_rand(10, string.ascii_uppercase + string.digits)}/"
                         f"B{_rand(10, string.ascii_uppercase + string.digits)}/{_rand(24)}",
        "google": f"AIza{_rand(35, _ALNUM + '_-')}",
        "google_oauth": f"GOCSPX-{_rand(28, _ALNUM + '_-')}",
        "npm": f"npm_{_rand(36)}",
        "pypi": f"pypi-AgEIcHlwaS5vcmc{_rand(70, _ALNUM + '_-')}",
        "sendgrid": f"SG.{_rand(22, _ALNUM + '_-')}.{_rand(43, _ALNUM + '_-')}",
        "twilio": f"SK{_hex(32)}",
        "mailchimp": f"{_hex(32)}-us{_rng.randint(1, 21)}",
        "huggingface": f"hf_{_rand(34)}",
        "digitalocean": f"dop_v1_{_hex(64)}",
        "shopify": f"shpat_{_hex(32)}",
        "telegram": f"{_rand(10, string.digits)}:AA{_rand(33, _ALNUM + '_-')}",
        "databricks": f"dapi{_hex(32)}",
        "groq": f"gsk_{_rand(52)}",
        "vault": f"hvs.{_rand(90, _ALNUM + '_-')}",
        "azure": f"AccountKey={_rand(86, _ALNUM + '+/')}==",
    }
    out = [Secret(f"vendor:{name}", key, f"here is the key {key} for the staging deploy")
           for name, key in vendor.items()]
    out += [
        Secret("vendor:openai", vendor["openai"], f'client = OpenAI(api_key="{vendor["openai"]}")'),
        Secret("vendor:aws", vendor["aws"], f"aws_access_key_id = {vendor['aws']}"),
        Secret("vendor:github", vendor["github"], f"git clone https://x-access-token:{vendor['github']}@github.com/o/r"),
    ]
    aws_secret = _rand(40, _ALNUM + "/+")
    out.append(Secret("labelled:aws_secret", aws_secret, f"aws_secret_access_key = {aws_secret}"))

    passwords = [
        ("prose", "Tr0ub4dor&3", "my password is Tr0ub4dor&3"),
        ("prose", "hunter2!x", "My new password is hunter2!x, don't forget it."),
        ("prose", "BlueFalcon#88", "the wifi password is BlueFalcon#88"),
        ("prose", "sunshine", "my password is sunshine"),
        ("prose", "correcthorse42", "Password: correcthorse42"),
        ("prose", "hunter2xyz", "pwd: hunter2xyz"),
        ("prose", "739105", "The passcode is 739105."),
        ("prose", "Zq7!pL2m", "I set the router password to Zq7!pL2m yesterday."),
        ("prose", "m4ple-Syrup-9", "my password was changed to m4ple-Syrup-9"),
        ("prose", "Kx9#vRt2", 'my password is "Kx9#vRt2"'),
        ("code", "hunter2!x", 'password = "hunter2!x"'),
        ("code", "s3cr3tP4ss", "DB_PASSWORD=s3cr3tP4ss"),
        ("code", "Xk9#mQ2$vL", '{"username": "ada", "password": "Xk9#mQ2$vL"}'),
        ("code", "Sup3r$ecret!", "spring.datasource.password=Sup3r$ecret!"),
        ("code", "Qw3rty!Z9x", "pg_dump --password=Qw3rty!Z9x app > app.sql"),
        ("code", "N0t-So-Ea5y!", "CREATE USER app WITH PASSWORD 'N0t-So-Ea5y!';"),
        ("code", "R4inb0w-Tr0ut", "  smtp_password: R4inb0w-Tr0ut"),
        ("code", "L1ght&House", "const dbPass = 'L1ght&House';"),
        ("code", "F1sh&Ch1ps", "if (password === 'F1sh&Ch1ps') {"),
        ("code", "v3ry-l0ng-p4ss", 'connect(user="app", password="v3ry-l0ng-p4ss")'),
        ("code", "Gr4ss&Sky7", "PGPASSWORD=Gr4ss&Sky7 psql -h db -U app"),
        ("prose", "W1ndy#Hill", "The password is: W1ndy#Hill"),
    ]
    out += [Secret(f"password:{where}", value, text) for where, value, text in passwords]

    labelled = [
        (s := _rand(32), f"export API_KEY={s}"),
        (s := _hex(64), f'JWT_SECRET = "{s}"'),
        (s := _rand(50, _ALNUM + "!@#%^&*(-_=+)"), f"SECRET_KEY = '{s}'"),
        (s := _rand(40), f"client_secret: {s}"),
        (s := _rand(32), f"the API key is {s}"),
        (s := _rand(40), f'const apiToken = "{s}";'),
        (s := _rand(48), f"the webhook secret {s} is what they gave me"),
        (s := f"{_hex(8)}-{_hex(4)}-4{_hex(3)}-a{_hex(3)}-{_hex(12)}", f"HEROKU_API_KEY={s}"),
        (s := _rand(24), f"https://api.example.com/v1/items?api_key={s}&page=2"),
    ]
    out += [Secret("labelled:token", value, text) for value, text in labelled]

    jwt = _jwt()
    out += [
        Secret("jwt", jwt, f"my session token: {jwt}"),
        Secret("jwt", jwt, f'"access_token": "{jwt}"'),
        Secret("bearer", (b := _rand(40)), f"curl -H 'Authorization: Bearer {b}' https://api.example.com"),
        Secret("labelled:token", (b := _hex(40)), f"Authorization: Token {b}"),
        Secret("basic_auth", (b := base64.b64encode(b"deploy:" + _rand(16).encode()).decode()),
               f"Authorization: Basic {b}"),
        Secret("url_credentials", (u := f"postgres://admin:{_rand(14)}@db.internal:5432/app"), f"DATABASE_URL={u}"),
        Secret("url_credentials", (u := f"mysql://app:Zx81!kq2{_rand(4)}@10.0.0.5:3306/shop"), f"connect to {u} now"),
        Secret("url_credentials", (u := f"redis://:{_rand(20)}@cache:6379/0"), f"REDIS_URL={u}"),
    ]
    for kind in ("RSA", "EC", "OPENSSH", ""):
        pem = _pem(kind)
        out.append(Secret("private_key", pem, f"here is the deploy key:\n{pem}\nthanks"))
    escaped = _pem("").replace("\n", "\\n")  # a service account's JSON keeps the key on one line
    out.append(Secret("private_key", escaped, f'{{"type": "service_account", "private_key": "{escaped}\\n"}}'))
    out += [Secret("card_number", c, f"charge my card {c} please") for c in cards]
    out += [Secret("card_number", _spaced(cards[0]), f"card: {_spaced(cards[0])}, exp 04/27"),
            Secret("card_number", _spaced(cards[1], "-"), f"use {_spaced(cards[1], '-')} for the order")]
    out += [Secret("iban", i, f"wire it to {i} tomorrow") for i in ibans]
    out.append(Secret("iban", _spaced(ibans[0]), f"IBAN: {_spaced(ibans[0])}"))
    out += [
        Secret("pin", "4821", "My PIN is 4821 for the debit card."),
        Secret("pin", "937", "the cvv is 937"),
        Secret("pin", "662901", "my 2fa code is 662901"),
        Secret("pin", "7319", "The alarm code is 7319, the zip code is 94103."),
        Secret("ssn", "123-45-6789", "my SSN is 123-45-6789"),
    ]
    return out
