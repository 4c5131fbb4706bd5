-- The tables the engine writes without a statement and the columns its C
-- code knows of them (df_internal.row_layouts(), src/store/row_layouts.c)
-- agree: a column added to one of them in the install script and not in
-- the C code, or the other way round, is a row here.
WITH c AS (SELECT * FROM df_internal.row_layouts()),
	 installed AS (
		SELECT n.nspname || '.' || r.relname AS table_name, a.attname::text AS column_name
		FROM pg_attribute a
		JOIN pg_class r ON r.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = r.relnamespace
		WHERE a.attnum > 0 AND NOT a.attisdropped
		  AND n.nspname || '.' || r.relname IN (SELECT table_name FROM c))
SELECT table_name, column_name,
	   CASE WHEN i.column_name IS NULL THEN 'only in the C layout'
			ELSE 'only in the installed table' END AS where_
FROM c FULL JOIN installed i USING (table_name, column_name)
WHERE c.column_name IS NULL OR i.column_name IS NULL
ORDER BY 1, 2;
-- every table of the layouts is there
SELECT count(DISTINCT table_name) AS tables FROM df_internal.row_layouts();
