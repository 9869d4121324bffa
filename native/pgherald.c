/*
 * pgherald's native statement triggers: statements published without the
 * plpgsql interpreter or a query over the transition tables. In durable mode
 * that is every statement, of one row or of 100,000, whose events go into
 * the journal in the plpgsql function's batches; in notify-only mode the
 * single-row statement, since several rows are packed into notifications.
 * Anything else is handed to the plpgsql trigger function of the same mode,
 * with the same trigger data, so the events are the same whichever library
 * the server has.
 *
 * The events and journal rows are byte for byte the ones
 * pgherald.publish_statement_durable and pgherald.publish_statement write
 * (sql/install.sql): row_to_json for the rows, the key as json's -> reads
 * it from them, clock_timestamp in UTC for `at`, once per statement.
 *
 * The writer needs no grant on pgherald's schema, as with the plpgsql
 * functions, which run as their owner: the journal row, the event id and
 * the notification are written here without privilege checks, and the
 * channel is read from pgherald.setting, which the writer may not read.
 *
 * In durable mode the notification goes out only while a daemon is parked
 * (pgherald.doorbell, sql/install.sql): otherwise the daemons are reading
 * the journal, and the commit skips NOTIFY's database-wide lock. It goes out
 * at the transaction's pre-commit, not from the trigger: a transaction that
 * is prepared instead (PREPARE TRANSACTION, which PostgreSQL refuses after
 * NOTIFY) then notifies no one, and the daemon finds its events in the
 * journal once it commits. pgherald.ring, which the plpgsql functions call
 * in durable mode, defers the same way, so a transaction's notifications
 * keep their order whichever library wrote them.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/xid8.h"

#if PG_VERSION_NUM < 140000
#error "pgherald's native triggers need PostgreSQL 14 or later; install pgherald with --triggers plpgsql"
#endif

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(pgherald_native_version);
PG_FUNCTION_INFO_V1(pgherald_publish_statement_durable);
PG_FUNCTION_INFO_V1(pgherald_publish_statement);
PG_FUNCTION_INFO_V1(pgherald_ring);

static Datum publish_statement(FunctionCallInfo fcinfo, bool durable, const char *plpgsql_function);

/*
 * The pgherald.version() whose events this library writes; install.sql uses
 * the library only when the two agree.
 */
#define PUBLISHER_VERSION 12

/* pgherald.notify_limit(): NOTIFY rejects payloads of BLCKSZ - NAMEDATALEN - 128 bytes or more. */
#define NOTIFY_LIMIT (BLCKSZ - 192)

/*
 * Calls the plpgsql trigger function pgherald.NAME with this call's trigger
 * data, as the trigger manager would have; plpgsql registers the transition
 * tables itself, and the function runs as its owner. Looked up on each
 * call, which only statements of other sizes pay, so a reinstalled schema
 * never leaves a stale function behind; looked up in the catalog, as the
 * writer may not use pgherald's schema.
 */
static Datum
publish_in_plpgsql(FunctionCallInfo fcinfo, const char *name)
{
	Oid			function = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
										   PointerGetDatum(buildoidvector(NULL, 0)),
										   ObjectIdGetDatum(get_namespace_oid("pgherald", false)));
	FmgrInfo	flinfo;

	LOCAL_FCINFO(call, 0);

	if (!OidIsValid(function))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
						errmsg("pgherald: the function pgherald.%s() does not exist", name),
						errhint("Run pgherald install again.")));
	fmgr_info(function, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, 0, InvalidOid, fcinfo->context, NULL);
	return FunctionCallInvoke(call);
}

/* How many rows a transition table holds; -1 for none. */
static int64
rows_in(Tuplestorestate *rows)
{
	return rows == NULL ? -1 : tuplestore_tuple_count(rows);
}

/*
 * A transition table read in order, through a read pointer of our own as a
 * scan of it takes; an UPDATE's two tables hold old and new rows in the
 * same order, so two readers pair them by position.
 */
typedef struct RowReader
{
	Tuplestorestate *rows;
	TupleTableSlot *slot;
	int			pointer;
} RowReader;

static void
open_rows(RowReader *reader, Tuplestorestate *rows, TupleDesc desc)
{
	reader->rows = rows;
	reader->slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	reader->pointer = tuplestore_alloc_read_pointer(rows, 0);
	tuplestore_select_read_pointer(rows, reader->pointer);
	tuplestore_rescan(rows);
}

/*
 * The next row, as row_to_json writes it. The slot lets go of the row at
 * once: a tuplestore that has spilled to disk reads each row into memory
 * of the caller's context, which the caller may reset before the next.
 */
static text *
next_row_json(RowReader *reader)
{
	text	   *json;

	tuplestore_select_read_pointer(reader->rows, reader->pointer);
	if (!tuplestore_gettupleslot(reader->rows, true, false, reader->slot))
		elog(ERROR, "pgherald: the transition table lost a row");
	json = DatumGetTextPP(DirectFunctionCall1(row_to_json, ExecFetchSlotHeapTupleDatum(reader->slot)));
	ExecClearTuple(reader->slot);
	return json;
}

static void
close_rows(RowReader *reader)
{
	ExecDropSingleTupleTableSlot(reader->slot);
}

/* The only row of a transition table, as row_to_json writes it. */
static text *
only_row_json(Tuplestorestate *rows, TupleDesc desc)
{
	RowReader	reader;
	text	   *json;

	open_rows(&reader, rows, desc);
	json = next_row_json(&reader);
	close_rows(&reader);
	return json;
}

/* JSON text as it is, or null. */
static void
append_json(StringInfo event, text *json)
{
	if (json == NULL)
		appendStringInfoString(event, "null");
	else
		appendBinaryStringInfo(event, VARDATA_ANY(json), VARSIZE_ANY_EXHDR(json));
}

/* Where the JSON string that starts at `at` ends, after its closing quote. */
static const char *
string_end(const char *at, const char *end)
{
	for (at++; at < end && *at != '"'; at++)
		if (*at == '\\')
			at++;
	return at < end ? at + 1 : end;
}

/*
 * Where the JSON value that starts at `at` ends: at the `,` or `}` that
 * follows it in row_to_json's object, outside strings and nested values.
 */
static const char *
value_end(const char *at, const char *end)
{
	int			depth = 0;

	while (at < end)
	{
		if (*at == '"')
		{
			at = string_end(at, end);
			continue;
		}
		if (*at == '{' || *at == '[')
			depth++;
		else if (*at == '}' || *at == ']')
		{
			if (depth == 0)
				return at;
			depth--;
		}
		else if (*at == ',' && depth == 0)
			return at;
		at++;
	}
	return end;
}

/* The key columns' names as JSON strings, escaped once per statement rather than once per row. */
typedef struct KeyNames
{
	int			count;
	StringInfoData *escaped;
} KeyNames;

static KeyNames
key_names(Trigger *trigger)
{
	KeyNames	names;
	int			i;

	names.count = trigger->tgnargs;
	names.escaped = palloc(Max(names.count, 1) * sizeof(StringInfoData));
	for (i = 0; i < names.count; i++)
	{
		initStringInfo(&names.escaped[i]);
		escape_json(&names.escaped[i], trigger->tgargs[i]);
	}
	return names;
}

/*
 * The `pk` member, as pgherald.event_key reads it with json's ->: each key
 * column's value as the row's JSON text has it, or null. The row is
 * row_to_json's object, so its members are found by their names' JSON
 * without parsing the values. -> fails on \u0000, around which the plpgsql
 * function reads with U+FFFD in its place, and so does this.
 */
static void
append_key(StringInfo event, text *row, const KeyNames *names)
{
	const char *start = VARDATA_ANY(row);
	const char *end = start + VARSIZE_ANY_EXHDR(row);
	int			i;

	if (names->count == 0)
	{
		appendStringInfoString(event, "null");
		return;
	}
	appendStringInfoChar(event, '{');
	for (i = 0; i < names->count; i++)
	{
		StringInfo	name = &names->escaped[i];
		const char *member;
		const char *value = NULL;
		const char *value_stop = NULL;

		if (i > 0)
			appendStringInfoChar(event, ',');
		appendBinaryStringInfo(event, name->data, name->len);
		appendStringInfoChar(event, ':');
		for (member = start + 1; member < end && *member == '"';)
		{
			const char *name_stop = string_end(member, end);
			const char *stop = value_end(name_stop + 1, end);

			if (name_stop - member == name->len && memcmp(member, name->data, name->len) == 0)
			{
				value = name_stop + 1;
				value_stop = stop;
				break;
			}
			member = stop + 1;
		}
		if (value == NULL)
		{
			appendStringInfoString(event, "null");
			continue;
		}
		for (; value < value_stop; value++)
		{
			if (value_stop - value >= 6 && memcmp(value, "\\u0000", 6) == 0)
			{
				appendStringInfoString(event, "\\ufffd");
				value += 5;
			}
			else
				appendStringInfoChar(event, *value);
		}
	}
	appendStringInfoChar(event, '}');
}

/* `txid` and `at`, the end of every event (pgherald.event_tail). */
static void
append_tail(StringInfo tail, FullTransactionId transaction_id)
{
	struct pg_tm tm;
	fsec_t		fsec;

	if (timestamp2tm(GetCurrentTimestamp(), NULL, &tm, &fsec, NULL, NULL) != 0)
		elog(ERROR, "pgherald: the clock is out of range");
	appendStringInfo(tail, ",\"txid\":\"" UINT64_FORMAT "\",\"at\":\"%04d-%02d-%02dT%02d:%02d:%02d.%06dZ\"}",
					 U64FromFullTransactionId(transaction_id),
					 tm.tm_year, tm.tm_mon, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int) fsec);
}

/*
 * Journal rows as the INSERTs in pgherald.publish_statement_durable write
 * them, without planning and running those statements: the unset columns
 * are null but created_at, which is now(), and every index of the journal
 * is kept. Opened once for a statement's rows.
 */
typedef struct JournalWriter
{
	Relation	journal;
	EState	   *estate;
	ResultRelInfo *result;
	TupleTableSlot *slot;
} JournalWriter;

/*
 * A journal row being gathered: up to 100 events or about 1 MB, from
 * first_id through last_id, separated by U+001E, as the plpgsql function
 * batches a statement of many rows.
 */
typedef struct JournalBatch
{
	StringInfoData events;
	int64		first_id;
	int64		last_id;
	int			count;
} JournalBatch;

/*
 * The last value of the sequence pgherald.<name>, read from its one tuple,
 * which is updated in place and so needs no snapshot, the way PostgreSQL's
 * own sequence functions read it; the writer needs no privilege on it.
 */
static int64
sequence_last_value(Oid namespace, const char *name)
{
	Oid			sequence_id = get_relname_relid(name, namespace);
	Relation	sequence;
	Buffer		buffer;
	Page		page;
	HeapTupleHeader tuple;
	int64		value;

	if (!OidIsValid(sequence_id))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("pgherald: the sequence pgherald.%s does not exist", name),
						errhint("Run pgherald install again.")));
	sequence = relation_open(sequence_id, AccessShareLock);
	if (sequence->rd_rel->relkind != RELKIND_SEQUENCE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("pgherald: pgherald.%s is not a sequence", name),
						errhint("Run pgherald install again.")));
	buffer = ReadBuffer(sequence, 0);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	tuple = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, FirstOffsetNumber));
	/* last_value is the sequence tuple's first column, as in FormData_pg_sequence_data. */
	value = *(int64 *) ((char *) tuple + tuple->t_hoff);
	UnlockReleaseBuffer(buffer);
	relation_close(sequence, AccessShareLock);
	return value;
}

/* The journal part writers insert into (version 11): pgherald.journal_current, 1 or 2. */
static void
open_journal(JournalWriter *writer, Oid namespace)
{
	char		name[NAMEDATALEN];
	Oid			journal_id;

	snprintf(name, sizeof(name), "journal_%d", (int) sequence_last_value(namespace, "journal_current"));
	journal_id = get_relname_relid(name, namespace);
	if (!OidIsValid(journal_id))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("pgherald: the table pgherald.%s does not exist", name),
						errhint("Run pgherald install again.")));
	writer->journal = table_open(journal_id, RowExclusiveLock);
	writer->estate = CreateExecutorState();
	writer->result = makeNode(ResultRelInfo);
	InitResultRelInfo(writer->result, writer->journal, 1, NULL, 0);
	ExecOpenIndices(writer->result, false);
	writer->slot = ExecInitExtraTupleSlot(writer->estate, RelationGetDescr(writer->journal), &TTSOpsVirtual);
}

static void
set_column(TupleTableSlot *slot, TupleDesc desc, const char *name, Datum value)
{
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attribute = TupleDescAttr(desc, i);

		if (!attribute->attisdropped && strcmp(NameStr(attribute->attname), name) == 0)
		{
			slot->tts_values[i] = value;
			slot->tts_isnull[i] = false;
			return;
		}
	}
	elog(ERROR, "pgherald: the journal has no column %s; run pgherald install again", name);
}

/* One journal row: a single event's has neither last_id nor event_count. */
static void
write_journal_row(JournalWriter *writer, JournalBatch *batch, FullTransactionId transaction_id)
{
	TupleDesc	desc = RelationGetDescr(writer->journal);
	TupleTableSlot *slot = writer->slot;
	text	   *events = cstring_to_text_with_len(batch->events.data, batch->events.len);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, desc->natts * sizeof(bool));
	set_column(slot, desc, "id", Int64GetDatum(batch->first_id));
	if (batch->count > 1)
	{
		set_column(slot, desc, "last_id", Int64GetDatum(batch->last_id));
		set_column(slot, desc, "event_count", Int32GetDatum(batch->count));
	}
	set_column(slot, desc, "txid", FullTransactionIdGetDatum(transaction_id));
	set_column(slot, desc, "event", PointerGetDatum(events));
	set_column(slot, desc, "created_at", TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	ExecStoreVirtualTuple(slot);

	table_tuple_insert(writer->journal, slot, GetCurrentCommandId(true), 0, NULL);
	ExecInsertIndexTuples(writer->result, slot, writer->estate, false, false, NULL, NIL
#if PG_VERSION_NUM >= 160000
						  ,false
#endif
		);
	ResetPerTupleExprContext(writer->estate);
	ExecClearTuple(slot);
	pfree(events);
}

static void
close_journal(JournalWriter *writer)
{
	ExecCloseIndices(writer->result);
	ExecResetTupleTable(writer->estate->es_tupleTable, false);
	FreeExecutorState(writer->estate);
	table_close(writer->journal, NoLock);
}

/*
 * The channel the triggers notify on: pgherald.setting's `channel`, which
 * the first install chose and every later one keeps. Read once per backend
 * and install: an uninstall and install makes a new schema, and so a new
 * channel is read.
 */
static const char *
notify_channel(Oid namespace)
{
	static Oid	read_for = InvalidOid;
	static char channel[NAMEDATALEN];
	Oid			setting_id;
	Relation	setting;
	TableScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	if (read_for == namespace)
		return channel;
	setting_id = get_relname_relid("setting", namespace);
	if (!OidIsValid(setting_id))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("pgherald: the table pgherald.setting does not exist"),
						errhint("Run pgherald install again.")));
	setting = table_open(setting_id, AccessShareLock);
	scan = table_beginscan(setting, GetActiveSnapshot(), 0, NULL);
	while (!found && (tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		name_null;
		bool		value_null;
		Datum		name = heap_getattr(tuple, 1, RelationGetDescr(setting), &name_null);
		Datum		value = heap_getattr(tuple, 2, RelationGetDescr(setting), &value_null);

		if (!name_null && !value_null && strcmp(TextDatumGetCString(name), "channel") == 0)
		{
			strlcpy(channel, TextDatumGetCString(value), NAMEDATALEN);
			found = true;
		}
	}
	table_endscan(scan);
	table_close(setting, AccessShareLock);
	if (!found)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						errmsg("pgherald: pgherald.setting has no channel"),
						errhint("Run pgherald install again.")));
	read_for = namespace;
	return channel;
}

/* Whether a daemon is parked, waiting for a notification: pgherald.doorbell above zero. */
static bool
doorbell_armed(Oid namespace)
{
	return sequence_last_value(namespace, "doorbell") > 0;
}

/* Whether the table has virtual generated columns, which read as null from its transition tables (PostgreSQL 18). */
static bool
has_virtual_columns(Relation relation)
{
#if PG_VERSION_NUM >= 180000
	TupleConstr *constraints = RelationGetDescr(relation)->constr;

	return constraints != NULL && constraints->has_generated_virtual;
#else
	return false;
#endif
}

/*
 * A durable notification waiting for its transaction's pre-commit, with the
 * transaction nesting level that queued it, so that a rolled back
 * subtransaction takes its own back, as it takes back its journal rows.
 */
typedef struct DeferredNotification
{
	int			nest_level;
	char	   *channel;
	char	   *payload;
} DeferredNotification;

/* This transaction's deferred notifications, in the order they were queued; kept in TopTransactionContext. */
static List *deferred = NIL;
static bool callbacks_registered = false;

/* Sends what waited, in order: before the commit, so NOTIFY queues it with the transaction. */
static void
send_deferred(void)
{
	List	   *sending = deferred;
	ListCell   *cell;

	deferred = NIL;
	foreach(cell, sending)
	{
		DeferredNotification *notification = (DeferredNotification *) lfirst(cell);

		Async_Notify(notification->channel, notification->payload);
	}
}

static void
transaction_ends(XactEvent event, void *argument)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			send_deferred();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * A prepared transaction notifies no one. Its journal rows wait
			 * for COMMIT PREPARED, after which the daemon's sweeps find them.
			 */
			deferred = NIL;
			break;
		default:
			/* Ended: the list itself went with TopTransactionContext. */
			deferred = NIL;
			break;
	}
}

static void
subtransaction_ends(SubXactEvent event, SubTransactionId subtransaction, SubTransactionId parent, void *argument)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *cell;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	foreach(cell, deferred)
	{
		DeferredNotification *notification = (DeferredNotification *) lfirst(cell);

		if (notification->nest_level < level)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			deferred = foreach_delete_current(deferred, cell);
		else
			notification->nest_level = level - 1;
	}
}

/* Queues a notification for the transaction's pre-commit. */
static void
defer_notification(const char *channel, const char *payload)
{
	MemoryContext previous = MemoryContextSwitchTo(TopTransactionContext);
	DeferredNotification *notification = palloc(sizeof(DeferredNotification));

	notification->nest_level = GetCurrentTransactionNestLevel();
	notification->channel = pstrdup(channel);
	notification->payload = pstrdup(payload);
	deferred = lappend(deferred, notification);
	MemoryContextSwitchTo(previous);
	if (!callbacks_registered)
	{
		RegisterXactCallback(transaction_ends, NULL);
		RegisterSubXactCallback(subtransaction_ends, NULL);
		callbacks_registered = true;
	}
}

/*
 * Says, under any error raised while a change is published, that the
 * user's write failed because pgherald could not publish it, and how to
 * stop publishing that table.
 */
static void
publishing_error_context(void *argument)
{
	Relation	relation = (Relation) argument;
	char	   *name = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(relation)),
												  RelationGetRelationName(relation));

	errcontext("pgherald could not publish this change to %s, so the write was refused rather than go unpublished; "
			   "report it, and to let writes through unpublished run SELECT pgherald.exclude(%s)",
			   name, quote_literal_cstr(name));
}

static Datum
publish(FunctionCallInfo fcinfo, bool durable, const char *plpgsql_function)
{
	TriggerData *trigger_data = (TriggerData *) fcinfo->context;
	ErrorContextCallback context;
	Datum		result;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
						errmsg("pgherald: %s can only run as a trigger", plpgsql_function)));
	context.callback = publishing_error_context;
	context.arg = trigger_data->tg_relation;
	context.previous = error_context_stack;
	error_context_stack = &context;
	result = publish_statement(fcinfo, durable, plpgsql_function);
	error_context_stack = context.previous;
	return result;
}

/* An event: {"id":…, then head, which ends in "pk":, the key, the rows and the tail. */
static void
append_event(StringInfo event, int64 event_id, StringInfo head, StringInfo key, text *new_row, text *old_row, StringInfo tail)
{
	appendStringInfo(event, "{\"id\":\"" INT64_FORMAT "\"", event_id);
	appendBinaryStringInfo(event, head->data, head->len);
	appendBinaryStringInfo(event, key->data, key->len);
	appendStringInfoString(event, ",\"new\":");
	append_json(event, new_row);
	appendStringInfoString(event, ",\"old\":");
	append_json(event, old_row);
	appendBinaryStringInfo(event, tail->data, tail->len);
}

/* A reference to a statement's events in the journal, for a notification they do not fit. */
static char *
journal_reference(int64 first_id, int64 through_id, FullTransactionId transaction_id)
{
	StringInfoData reference;

	initStringInfo(&reference);
	appendStringInfo(&reference, "{\"ref\":\"" INT64_FORMAT "\",", first_id);
	if (through_id > first_id)
		appendStringInfo(&reference, "\"through\":\"" INT64_FORMAT "\",", through_id);
	appendStringInfo(&reference, "\"txid\":\"" UINT64_FORMAT "\"}", U64FromFullTransactionId(transaction_id));
	return reference.data;
}

/*
 * A durable statement's events, however many rows it changed, as
 * pgherald.publish_statement_durable writes them: numbered in the order the
 * rows changed, gathered into journal rows of up to 100 events or about
 * 1 MB, and, while a daemon is parked, one notification that carries them
 * when they fit in one journal row and a notification, or else their range.
 * Each row's event is built in a memory context that is reset for the next,
 * so a statement of 100,000 rows holds one journal row's worth at a time.
 */
static void
publish_durable(TriggerData *trigger_data, int64 changed, StringInfo head, StringInfo tail,
				FullTransactionId transaction_id, Oid namespace)
{
	TriggerEvent fired = trigger_data->tg_event;
	TupleDesc	desc = RelationGetDescr(trigger_data->tg_relation);
	bool		has_new = !TRIGGER_FIRED_BY_DELETE(fired);
	bool		has_old = !TRIGGER_FIRED_BY_INSERT(fired);
	Oid			event_ids = get_relname_relid("event_id", namespace);
	MemoryContext per_row = AllocSetContextCreate(CurrentMemoryContext, "pgherald event", ALLOCSET_DEFAULT_SIZES);
	KeyNames	names = key_names(trigger_data->tg_trigger);
	RowReader	new_rows;
	RowReader	old_rows;
	JournalWriter writer;
	JournalBatch batch;
	StringInfoData key;
	StringInfoData event;
	int64		weight = 0;
	int64		batch_number = 0;
	int64		first_id = 0;
	int			batches = 0;
	char	   *payload = NULL;
	int64		row;

	if (has_new)
		open_rows(&new_rows, trigger_data->tg_newtable, desc);
	if (has_old)
		open_rows(&old_rows, trigger_data->tg_oldtable, desc);
	open_journal(&writer, namespace);
	initStringInfo(&batch.events);
	batch.count = 0;
	for (row = 0; row <= changed; row++)
	{
		MemoryContext previous;
		text	   *new_row = NULL;
		text	   *old_row = NULL;
		int64		event_id = 0;

		if (row < changed)
		{
			previous = MemoryContextSwitchTo(per_row);
			if (has_new)
				new_row = next_row_json(&new_rows);
			if (has_old)
				old_row = next_row_json(&old_rows);
			initStringInfo(&key);
			append_key(&key, new_row != NULL ? new_row : old_row, &names);
			event_id = nextval_internal(event_ids, false);
			initStringInfo(&event);
			append_event(&event, event_id, head, &key, new_row, old_row, tail);
			MemoryContextSwitchTo(previous);
			/* The plpgsql function's rule: each event weighs its length and a hundredth of a megabyte. */
			weight += event.len + 10486;
		}
		if (batch.count > 0 && (row == changed || weight / 1048576 != batch_number))
		{
			write_journal_row(&writer, &batch, transaction_id);
			if (++batches == 1)
			{
				first_id = batch.first_id;
				if (batch.events.len < NOTIFY_LIMIT)
					payload = pstrdup(batch.events.data);
			}
			resetStringInfo(&batch.events);
			batch.count = 0;
		}
		if (row == changed)
			break;
		batch_number = weight / 1048576;
		if (batch.count == 0)
			batch.first_id = event_id;
		else
			appendStringInfoChar(&batch.events, '\x1e');
		appendBinaryStringInfo(&batch.events, event.data, event.len);
		batch.last_id = event_id;
		batch.count++;
		MemoryContextReset(per_row);
	}
	close_journal(&writer);
	if (has_new)
		close_rows(&new_rows);
	if (has_old)
		close_rows(&old_rows);
	MemoryContextDelete(per_row);

	/* After the journal rows: the transaction has its id before it looks at the doorbell. */
	if (!doorbell_armed(namespace))
		return;
	if (batches > 1 || payload == NULL)
		payload = journal_reference(first_id, batch.last_id, transaction_id);
	defer_notification(notify_channel(namespace), payload);
}

static Datum
publish_statement(FunctionCallInfo fcinfo, bool durable, const char *plpgsql_function)
{
	TriggerData *trigger_data = (TriggerData *) fcinfo->context;
	TriggerEvent fired;
	const char *op;
	int64		new_count;
	int64		old_count;
	int64		changed;
	text	   *new_row = NULL;
	text	   *old_row = NULL;
	StringInfoData head;
	KeyNames	names;
	StringInfoData key;
	StringInfoData tail;
	StringInfoData event;
	FullTransactionId transaction_id;
	int64		event_id;
	Oid			namespace;

	fired = trigger_data->tg_event;
	if (TRIGGER_FIRED_BY_INSERT(fired))
		op = "INSERT";
	else if (TRIGGER_FIRED_BY_UPDATE(fired))
		op = "UPDATE";
	else if (TRIGGER_FIRED_BY_DELETE(fired))
		op = "DELETE";
	else
		op = NULL;
	new_count = TRIGGER_FIRED_BY_DELETE(fired) ? 0 : rows_in(trigger_data->tg_newtable);
	old_count = TRIGGER_FIRED_BY_INSERT(fired) ? 0 : rows_in(trigger_data->tg_oldtable);
	changed = Max(new_count, old_count);
	if (changed == 0)
		return PointerGetDatum(NULL);
	/*
	 * Anything but an AFTER statement trigger with its transition tables,
	 * whose columns all read as stored, is plpgsql's to publish or refuse;
	 * so is a notify-only statement of several rows, which packs its events
	 * into notifications.
	 */
	if (op == NULL || !TRIGGER_FIRED_FOR_STATEMENT(fired) || !TRIGGER_FIRED_AFTER(fired)
		|| has_virtual_columns(trigger_data->tg_relation)
		|| new_count < 0 || old_count < 0
		|| (TRIGGER_FIRED_BY_UPDATE(fired) && new_count != old_count)
		|| (!durable && changed != 1))
		return publish_in_plpgsql(fcinfo, plpgsql_function);

	transaction_id = GetTopFullTransactionId();
	initStringInfo(&head);
	appendStringInfo(&head, ",\"op\":\"%s\",\"schema\":", op);
	escape_json(&head, get_namespace_name(RelationGetNamespace(trigger_data->tg_relation)));
	appendStringInfoString(&head, ",\"table\":");
	escape_json(&head, RelationGetRelationName(trigger_data->tg_relation));
	appendStringInfoString(&head, ",\"pk\":");
	initStringInfo(&tail);
	append_tail(&tail, transaction_id);
	namespace = get_namespace_oid("pgherald", false);
	if (durable)
	{
		publish_durable(trigger_data, changed, &head, &tail, transaction_id, namespace);
		return PointerGetDatum(NULL);
	}

	if (!TRIGGER_FIRED_BY_DELETE(fired))
		new_row = only_row_json(trigger_data->tg_newtable, RelationGetDescr(trigger_data->tg_relation));
	if (!TRIGGER_FIRED_BY_INSERT(fired))
		old_row = only_row_json(trigger_data->tg_oldtable, RelationGetDescr(trigger_data->tg_relation));
	initStringInfo(&key);
	names = key_names(trigger_data->tg_trigger);
	append_key(&key, new_row != NULL ? new_row : old_row, &names);
	event_id = nextval_internal(get_relname_relid("event_id", namespace), false);
	initStringInfo(&event);
	append_event(&event, event_id, &head, &key, new_row, old_row, &tail);
	if (event.len >= NOTIFY_LIMIT)
	{
		/* Too large to notify, so it goes without its rows, marked as omitted. */
		resetStringInfo(&event);
		appendStringInfo(&event, "{\"id\":\"" INT64_FORMAT "\"", event_id);
		appendBinaryStringInfo(&event, head.data, head.len);
		appendStringInfoString(&event, key.len < NOTIFY_LIMIT - 1024 ? key.data : "null");
		appendStringInfoString(&event, ",\"new\":null,\"old\":null,\"omitted\":true");
		appendBinaryStringInfo(&event, tail.data, tail.len);
	}
	Async_Notify(notify_channel(namespace), event.data);
	return PointerGetDatum(NULL);
}

Datum
pgherald_publish_statement_durable(PG_FUNCTION_ARGS)
{
	return publish(fcinfo, true, "publish_statement_durable");
}

Datum
pgherald_publish_statement(PG_FUNCTION_ARGS)
{
	return publish(fcinfo, false, "publish_statement");
}

/*
 * pgherald.ring(payload): a durable notification from the plpgsql
 * functions, deferred to pre-commit with the native triggers' own.
 */
Datum
pgherald_ring(PG_FUNCTION_ARGS)
{
	char	   *payload = text_to_cstring(PG_GETARG_TEXT_PP(0));

	defer_notification(notify_channel(get_namespace_oid("pgherald", false)), payload);
	PG_RETURN_VOID();
}

Datum
pgherald_native_version(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(PUBLISHER_VERSION);
}
