-- Foundation: platform switch, accounts, members, departments, integrations with policy and
-- coverage, server keys and widget sessions. Times are Unix milliseconds from the service's
-- clock (never the database's now()), so tests can move time.

CREATE TABLE platform_settings (
  id          integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
  disabled    boolean NOT NULL DEFAULT false,
  updated_at  bigint  NOT NULL
);

CREATE TABLE accounts (
  id              text PRIMARY KEY,
  kind            text NOT NULL CHECK (kind IN ('personal', 'business')),
  name            text NOT NULL,
  status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
  -- wallet, in millionths of the currency unit
  balance_micros  bigint NOT NULL DEFAULT 0,
  currency        text NOT NULL DEFAULT 'USD',
  -- the account's provider credentials: webhook signatures are verified against these
  provider_account_sid text NOT NULL,
  provider_auth_token  text NOT NULL,
  created_at      bigint NOT NULL
);

CREATE TABLE departments (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name        text NOT NULL,
  created_at  bigint NOT NULL,
  UNIQUE (account_id, name)
);

CREATE TABLE members (
  id             text PRIMARY KEY,
  account_id     text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  email          text NOT NULL,
  uuid           uuid NOT NULL UNIQUE,
  name           text NOT NULL,
  enabled        boolean NOT NULL DEFAULT true,
  removed        boolean NOT NULL DEFAULT false,
  department_id  text REFERENCES departments(id) ON DELETE SET NULL,
  created_at     bigint NOT NULL,
  UNIQUE (account_id, email)
);
CREATE INDEX members_email_ci ON members (account_id, lower(email));

CREATE TABLE integrations (
  id                   text PRIMARY KEY,
  account_id           text NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name                 text NOT NULL,
  status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled', 'revoked')),
  allowed_origins      text[] NOT NULL DEFAULT '{}',
  allow_all_origins    boolean NOT NULL DEFAULT false,
  identifier_mode      text NOT NULL DEFAULT 'email' CHECK (identifier_mode IN ('email', 'uuid')),
  window_mode          text NOT NULL DEFAULT 'popup' CHECK (window_mode IN ('popup', 'tab', 'frame-shell', 'extension')),
  -- policy defaults
  outbound             boolean NOT NULL DEFAULT true,
  inbound              boolean NOT NULL DEFAULT true,
  number_visibility    text NOT NULL DEFAULT 'show' CHECK (number_visibility IN ('show', 'hide', 'masked')),
  controls             text[] NOT NULL DEFAULT '{mute,dtmf}',
  widget_defaults      jsonb NOT NULL DEFAULT '{"position":"bottom-right","language":"en"}',
  max_call_seconds     integer NOT NULL DEFAULT 3600 CHECK (max_call_seconds > 0),
  caller_id            text,
  destination_countries text[] NOT NULL DEFAULT '{}',
  concurrency_limit    integer NOT NULL DEFAULT 10 CHECK (concurrency_limit > 0),
  -- coverage
  coverage_mode        text NOT NULL DEFAULT 'everyone' CHECK (coverage_mode IN ('everyone', 'members', 'departments')),
  coverage_inherit_future boolean NOT NULL DEFAULT true,
  coverage_set_at      bigint NOT NULL,
  created_at           bigint NOT NULL,
  revoked_at           bigint
);

-- Members an integration covers explicitly, with per-member overrides and, in uuid mode, the
-- integrator's UUID for that member.
CREATE TABLE integration_members (
  integration_id   text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id        text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  selected         boolean NOT NULL DEFAULT false,
  integrator_uuid  text,
  -- partial policy: any of outbound, inbound, number_visibility, controls, max_call_seconds,
  -- caller_id, plus calls_enabled (false = agent_disabled)
  overrides        jsonb NOT NULL DEFAULT '{}',
  PRIMARY KEY (integration_id, member_id)
);
CREATE INDEX integration_members_uuid ON integration_members (integration_id, lower(integrator_uuid));

CREATE TABLE integration_departments (
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  department_id   text NOT NULL REFERENCES departments(id) ON DELETE CASCADE,
  PRIMARY KEY (integration_id, department_id)
);

CREATE TABLE server_keys (
  id              text PRIMARY KEY,
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  lookup          text NOT NULL UNIQUE,
  secret_hash     bytea NOT NULL,
  created_at      bigint NOT NULL,
  revoked_at      bigint
);
CREATE INDEX server_keys_integration ON server_keys (integration_id);

CREATE TABLE widget_sessions (
  id              text PRIMARY KEY,
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id       text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  origin          text NOT NULL,
  lookup          text NOT NULL UNIQUE,
  secret_hash     bytea NOT NULL,
  created_at      bigint NOT NULL,
  expires_at      bigint NOT NULL,
  revoked_at      bigint,
  end_reason      text
);
CREATE INDEX widget_sessions_agent ON widget_sessions (integration_id, member_id);

-- One row per agent (integration, member): the WidgetState version, bumped by every change the
-- agent's widgets must see.
CREATE TABLE agent_versions (
  integration_id  text NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
  member_id       text NOT NULL REFERENCES members(id) ON DELETE CASCADE,
  version         bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (integration_id, member_id)
);

-- Calling rates per destination prefix (longest match wins), in millionths per minute.
CREATE TABLE rates (
  prefix               text PRIMARY KEY,
  per_minute_micros    bigint NOT NULL CHECK (per_minute_micros >= 0)
);

-- Do-not-call list, per account (account_id NULL = platform-wide).
CREATE TABLE blocked_numbers (
  account_id  text REFERENCES accounts(id) ON DELETE CASCADE,
  number      text NOT NULL,
  created_at  bigint NOT NULL
);
CREATE UNIQUE INDEX blocked_numbers_unique ON blocked_numbers (coalesce(account_id, ''), number);
