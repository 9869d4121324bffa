/*
 * pgherald's native statement triggers: the single-row statement, the common
 * case, published without the plpgsql interpreter or a query over the
 * transition table. A statement of any other size is handed to the plpgsql
 * trigger function of the same mode, with the same trigger data, so the
 * events are the same whichever library the server has.
 *
 * The event is byte for byte the one pgherald.publish_statement_durable and
 * pgherald.publish_statement write for one row (sql/install.sql): row_to_json
 * for the rows, json's -> for the key, clock_timestamp in UTC for `at`.
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
#include "catalog/pg_collation.h"
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
#define PUBLISHER_VERSION 9

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

/* The only row of a transition table, as row_to_json writes it. */
static text *
only_row_json(Tuplestorestate *rows, TupleDesc desc)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	text	   *json;

	/* A read pointer of our own, as a scan of the transition table takes. */
	tuplestore_select_read_pointer(rows, tuplestore_alloc_read_pointer(rows, 0));
	tuplestore_rescan(rows);
	if (!tuplestore_gettupleslot(rows, true, false, slot))
		elog(ERROR, "pgherald: the transition table lost its row");
	json = DatumGetTextPP(DirectFunctionCall1(row_to_json, ExecFetchSlotHeapTupleDatum(slot)));
	ExecDropSingleTupleTableSlot(slot);
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

/* Whether JSON text holds the escape \u0000. */
static bool
contains_null_escape(text *json)
{
	const char *at = VARDATA_ANY(json);
	const char *end = at + VARSIZE_ANY_EXHDR(json);

	for (; end - at >= 6; at++)
		if (memcmp(at, "\\u0000", 6) == 0)
			return true;
	return false;
}

/*
 * The `pk` member, as pgherald.event_key reads it: json's -> on the row,
 * which fails on \u0000, so the row is read with U+FFFD in its place.
 */
static void
append_key(StringInfo event, text *row, Trigger *trigger)
{
	text	   *readable = row;
	int			i;

	if (trigger->tgnargs == 0)
	{
		appendStringInfoString(event, "null");
		return;
	}
	if (contains_null_escape(row))
		readable = DatumGetTextPP(DirectFunctionCall3Coll(replace_text, DEFAULT_COLLATION_OID, PointerGetDatum(row),
													  CStringGetTextDatum("\\u0000"),
													  CStringGetTextDatum("\\ufffd")));
	appendStringInfoChar(event, '{');
	for (i = 0; i < trigger->tgnargs; i++)
	{
		Datum		value;

		LOCAL_FCINFO(field, 2);

		if (i > 0)
			appendStringInfoChar(event, ',');
		escape_json(event, trigger->tgargs[i]);
		appendStringInfoChar(event, ':');
		InitFunctionCallInfoData(*field, NULL, 2, InvalidOid, NULL, NULL);
		field->args[0].value = PointerGetDatum(readable);
		field->args[0].isnull = false;
		field->args[1].value = CStringGetTextDatum(trigger->tgargs[i]);
		field->args[1].isnull = false;
		value = json_object_field(field);
		if (field->isnull)
			appendStringInfoString(event, "null");
		else
			append_json(event, DatumGetTextPP(value));
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

/*
 * The journal row of one event, written as the INSERT in
 * pgherald.publish_statement_durable writes it, without planning and
 * running that statement: the unset columns are null but created_at, which
 * is now(), and every index of the journal is kept.
 */
static void
insert_into_journal(Oid namespace, int64 event_id, FullTransactionId transaction_id, StringInfo event)
{
	Oid			journal_id = get_relname_relid("journal", namespace);
	Relation	journal;
	TupleDesc	desc;
	EState	   *estate;
	ResultRelInfo *result;
	TupleTableSlot *slot;

	if (!OidIsValid(journal_id))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("pgherald: the table pgherald.journal does not exist"),
						errhint("Run pgherald install again.")));
	journal = table_open(journal_id, RowExclusiveLock);
	desc = RelationGetDescr(journal);
	estate = CreateExecutorState();
	result = makeNode(ResultRelInfo);
	InitResultRelInfo(result, journal, 1, NULL, 0);
	ExecOpenIndices(result, false);

	slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsVirtual);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, desc->natts * sizeof(bool));
	set_column(slot, desc, "id", Int64GetDatum(event_id));
	set_column(slot, desc, "txid", FullTransactionIdGetDatum(transaction_id));
	set_column(slot, desc, "event", PointerGetDatum(cstring_to_text_with_len(event->data, event->len)));
	set_column(slot, desc, "created_at", TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	ExecStoreVirtualTuple(slot);

	table_tuple_insert(journal, slot, GetCurrentCommandId(true), 0, NULL);
	ExecInsertIndexTuples(result, slot, estate, false, false, NULL, NIL
#if PG_VERSION_NUM >= 160000
						  ,false
#endif
		);

	ExecCloseIndices(result);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	table_close(journal, NoLock);
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

/*
 * Whether a daemon is parked, waiting for a notification: pgherald.doorbell
 * above zero. Read from the sequence's one tuple, which is updated in place
 * and so needs no snapshot, the way PostgreSQL's own sequence functions read
 * it; the writer needs no privilege on it.
 */
static bool
doorbell_armed(Oid namespace)
{
	Oid			doorbell_id = get_relname_relid("doorbell", namespace);
	Relation	doorbell;
	Buffer		buffer;
	Page		page;
	HeapTupleHeader tuple;
	int64		parked;

	if (!OidIsValid(doorbell_id))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("pgherald: the sequence pgherald.doorbell does not exist"),
						errhint("Run pgherald install again.")));
	doorbell = relation_open(doorbell_id, AccessShareLock);
	if (doorbell->rd_rel->relkind != RELKIND_SEQUENCE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
						errmsg("pgherald: pgherald.doorbell is not a sequence"),
						errhint("Run pgherald install again.")));
	buffer = ReadBuffer(doorbell, 0);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	tuple = (HeapTupleHeader) PageGetItem(page, PageGetItemId(page, FirstOffsetNumber));
	/* last_value is the sequence tuple's first column, as in FormData_pg_sequence_data. */
	parked = *(int64 *) ((char *) tuple + tuple->t_hoff);
	UnlockReleaseBuffer(buffer);
	relation_close(doorbell, AccessShareLock);
	return parked > 0;
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

static Datum
publish_statement(FunctionCallInfo fcinfo, bool durable, const char *plpgsql_function)
{
	TriggerData *trigger_data = (TriggerData *) fcinfo->context;
	TriggerEvent fired;
	TupleDesc	desc;
	const char *op;
	text	   *new_row = NULL;
	text	   *old_row = NULL;
	StringInfoData head;
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
	/*
	 * Anything but one row's AFTER statement trigger with its transition
	 * tables, whose columns all read as stored, is plpgsql's to publish or
	 * refuse.
	 */
	if (op == NULL || !TRIGGER_FIRED_FOR_STATEMENT(fired) || !TRIGGER_FIRED_AFTER(fired)
		|| has_virtual_columns(trigger_data->tg_relation)
		|| (!TRIGGER_FIRED_BY_DELETE(fired) && rows_in(trigger_data->tg_newtable) != 1)
		|| (!TRIGGER_FIRED_BY_INSERT(fired) && rows_in(trigger_data->tg_oldtable) != 1))
	{
		if (rows_in(TRIGGER_FIRED_BY_DELETE(fired) ? trigger_data->tg_oldtable : trigger_data->tg_newtable) == 0)
			return PointerGetDatum(NULL);
		return publish_in_plpgsql(fcinfo, plpgsql_function);
	}

	transaction_id = GetTopFullTransactionId();
	desc = RelationGetDescr(trigger_data->tg_relation);
	if (!TRIGGER_FIRED_BY_DELETE(fired))
		new_row = only_row_json(trigger_data->tg_newtable, desc);
	if (!TRIGGER_FIRED_BY_INSERT(fired))
		old_row = only_row_json(trigger_data->tg_oldtable, desc);

	initStringInfo(&head);
	appendStringInfo(&head, ",\"op\":\"%s\",\"schema\":", op);
	escape_json(&head, get_namespace_name(RelationGetNamespace(trigger_data->tg_relation)));
	appendStringInfoString(&head, ",\"table\":");
	escape_json(&head, RelationGetRelationName(trigger_data->tg_relation));
	appendStringInfoString(&head, ",\"pk\":");
	initStringInfo(&key);
	append_key(&key, new_row != NULL ? new_row : old_row, trigger_data->tg_trigger);

	namespace = get_namespace_oid("pgherald", false);
	event_id = nextval_internal(get_relname_relid("event_id", namespace), false);
	initStringInfo(&event);
	appendStringInfo(&event, "{\"id\":\"" INT64_FORMAT "\"", event_id);
	appendBinaryStringInfo(&event, head.data, head.len);
	appendBinaryStringInfo(&event, key.data, key.len);
	appendStringInfoString(&event, ",\"new\":");
	append_json(&event, new_row);
	appendStringInfoString(&event, ",\"old\":");
	append_json(&event, old_row);
	initStringInfo(&tail);
	append_tail(&tail, transaction_id);
	appendBinaryStringInfo(&event, tail.data, tail.len);

	if (durable)
	{
		insert_into_journal(namespace, event_id, transaction_id, &event);
		/* After the journal row: the transaction has its id before it looks at the doorbell. */
		if (!doorbell_armed(namespace))
			return PointerGetDatum(NULL);
		if (event.len >= NOTIFY_LIMIT)
		{
			resetStringInfo(&event);
			appendStringInfo(&event, "{\"ref\":\"" INT64_FORMAT "\",\"txid\":\"" UINT64_FORMAT "\"}",
							 event_id, U64FromFullTransactionId(transaction_id));
		}
		defer_notification(notify_channel(namespace), event.data);
		return PointerGetDatum(NULL);
	}
	else if (event.len >= NOTIFY_LIMIT)
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
