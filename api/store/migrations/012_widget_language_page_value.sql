-- "The page's language" is stored as the string 'page', not as null (011): nodes of the releases
-- before 011 check Policy.widget.language as a string and answered 500 (sessions, widget state,
-- pairing) for an integration created, or set to follow its page, by a newer node while they
-- still served beside it in a rolling upgrade. Every release takes a string; the SDKs before 011
-- speak English for 'page', as they did for their 'en', and so do 011's own until their page is
-- reloaded from a newer node (no value means "the page's language" to both). A null still written
-- by a node of 011's release reads as 'page' (widgetDefaults in api/domain/integrations/model.ts).
ALTER TABLE integrations ALTER COLUMN widget_defaults SET DEFAULT '{"position":"bottom-right","language":"page"}';
UPDATE integrations SET widget_defaults = jsonb_set(widget_defaults, '{language}', '"page"')
 WHERE widget_defaults->'language' = 'null'::jsonb;
