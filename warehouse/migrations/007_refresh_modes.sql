-- 007: ops.refreshes.mode records what the refresh did, as `refresh --json` and `status` say it:
-- a `--hot` or `--months` refresh was recorded as `incremental`, so status and the JSON
-- disagreed (issue 31). The column keeps its type; only the values it documents grow.
COMMENT ON COLUMN ops.refreshes.mode IS 'What the refresh read: full (everything, as a first sync does), incremental (the plan: parts re-read or proven by fingerprints, then only what differs), hot (the hot window only) or months (a `--months` range).';
