-- A new integration's widget speaks the language of the page it is on (<html lang>) until its
-- operator chooses one (c2c integration widget --language): with 'en' as the stored default, a
-- French CRM page's widget spoke English whatever the page said. Existing integrations keep what
-- they hold, which may be an operator's choice.
ALTER TABLE integrations ALTER COLUMN widget_defaults SET DEFAULT '{"position":"bottom-right","language":null}';
