-- Premium-rate numbers (libphonenumber's PREMIUM_RATE) are refused unless the operator allows them
-- for the integration (calls/checks.ts): off by default, against toll fraud.
ALTER TABLE integrations ADD COLUMN premium_rate_allowed boolean NOT NULL DEFAULT false;
