package io.blockheat.sql;

import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ScriptTransformation;
import org.apache.spark.sql.execution.command.DropTableCommand;
import org.apache.spark.sql.execution.command.SetCommand;

import scala.Function1;
import scala.Option;
import scala.Tuple2;
import scala.runtime.BoxedUnit;

/**
 * A Spark SQL extension (spark.sql.extensions) that makes a session read-only unless the server lets it write:
 * queries and the commands that only read or concern the user's own views and session (ALLOWED: views, SHOW,
 * DESCRIBE, EXPLAIN, table history, SET, USE, CACHE) pass; every other command (INSERT, DELETE, UPDATE, MERGE,
 * CREATE/DROP/ALTER/TRUNCATE TABLE, Delta's RESTORE, OPTIMIZE, VACUUM, ADD JAR, CREATE FUNCTION...), Java calls by
 * reflection (reflect, java_method, try_reflect), a SET of the PROTECTED settings from SQL, and any statement while
 * file queries (spark.sql.runSQLOnFiles) are on, are refused at analysis, before anything runs, statement by
 * statement (a script's, EXECUTE IMMEDIATE's). A script (TRANSFORM) is refused in every session. Its parser
 * (GuardParser) never substitutes variables.
 *
 * <p>Whether a session writes is decided by the server from how the client authenticated, never from a setting
 * the client sends: a session writes when it is not sealed and either the application allows writes (its Spark
 * configuration's ALLOW_WRITES, which no client changes: a server's --allow-writes) or the statement runs in a
 * Spark Connect operation, whose client proved the owner's token to the endpoint (Spark Connect's pre-shared token;
 * read-only users get SQL only, through the JDBC endpoint). A session whose READ_ONLY setting is true at any
 * statement is sealed from then on: no SET, RESET or script makes it write again (`blockheat sql` without
 * --allow-writes seals its session).
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {
    /** The application's setting: every session writes (a server's --allow-writes). */
    public static final String ALLOW_WRITES = "spark.blockheat.allowWrites";
    /** The session's setting that seals it read-only (true), for good. */
    public static final String READ_ONLY = "spark.blockheat.readOnly";
    static final String FILE_QUERIES = "spark.sql.runSQLOnFiles";
    /** Settings SQL may not change in a read-only session (READ_ONLY only to true). */
    static final Set<String> PROTECTED = Set.of(ALLOW_WRITES, READ_ONLY, FILE_QUERIES);
    /** The job tag of a Spark Connect operation (Spark Connect's ExecuteJobTag). */
    static final String CONNECT_OPERATION = "SparkConnect_OperationTag_";
    /** Sessions sealed read-only; weak: a closed session's entry goes with it. */
    private static final Set<SparkSession> SEALED =
        Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));
    /** Commands a read-only session runs, by class name (Spark's v1 and v2 forms, Delta's). */
    static final Set<String> ALLOWED = Set.of(
        "CreateViewCommand", "CreateView", "AlterViewAs", "AlterViewAsCommand", "DropView",
        "ShowTables", "ShowTablesCommand", "ShowTableExtended", "ShowTablesExtended", "ShowViews", "ShowViewsCommand",
        "ShowNamespaces", "ShowNamespacesCommand", "ShowColumns", "ShowColumnsCommand", "ShowPartitions",
        "ShowPartitionsCommand", "ShowCreateTable", "ShowCreateTableCommand", "ShowCreateTableAsSerdeCommand",
        "ShowTableProperties", "ShowTablePropertiesCommand", "ShowFunctions", "ShowFunctionsCommand", "ShowCatalogs",
        "ShowCatalogsCommand", "ShowCurrentNamespace", "ShowCurrentNamespaceCommand",
        "DescribeRelation", "DescribeTableCommand", "DescribeColumn", "DescribeColumnCommand", "DescribeNamespace",
        "DescribeDatabaseCommand", "DescribeFunction", "DescribeFunctionCommand", "DescribeQueryCommand",
        "DescribeDeltaHistory", "DescribeDeltaHistoryCommand", "DescribeDeltaDetailCommand", "ExplainCommand",
        "SetCommand", "ResetCommand", "SetCatalogAndNamespace", "SetNamespaceCommand", "SetCatalogCommand",
        "CreateVariable", "DropVariable", "SetVariable",
        "CacheTable", "CacheTableAsSelect", "UncacheTable", "CacheTableCommand", "UncacheTableCommand",
        "ClearCacheCommand", "RefreshTable", "RefreshTableCommand");

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectCheckRule(session -> (Function1<LogicalPlan, BoxedUnit>) plan -> {
            check(session, plan);
            return BoxedUnit.UNIT;
        });
        extensions.injectParser((session, parser) -> new GuardParser(session, parser));
        return BoxedUnit.UNIT;
    }

    /** Whether `session` may write (see the class comment); seals it when its READ_ONLY is true. */
    static boolean writable(SparkSession session) {
        if (SEALED.contains(session)) {
            return false;
        }
        if ("true".equalsIgnoreCase(session.conf().get(READ_ONLY, "false").trim())) {
            SEALED.add(session);
            return false;
        }
        if ("true".equalsIgnoreCase(session.sparkContext().getConf().get(ALLOW_WRITES, "false"))) {
            return true;
        }
        return session.sparkContext().getJobTags().exists(tag -> tag.startsWith(CONNECT_OPERATION));
    }

    static void check(SparkSession session, LogicalPlan plan) {
        boolean writable = writable(session);
        if (!writable && "true".equalsIgnoreCase(session.conf().get(FILE_QUERIES, "true"))) {
            refuse("any statement with " + FILE_QUERIES + " on");
        }
        plan.foreachWithSubqueries(node -> {
            inspect(node, writable);
            return BoxedUnit.UNIT;
        });
    }

    static void inspect(LogicalPlan node, boolean writable) {
        if (node instanceof ScriptTransformation) {
            refuse("TRANSFORM (a script)");
        }
        if (writable) {
            return;
        }
        if (node instanceof SetCommand) {
            Option<Tuple2<String, Option<String>>> kv = ((SetCommand) node).kv();
            if (kv.isDefined() && kv.get()._2().isDefined() && PROTECTED.contains(kv.get()._1().trim())
                    && !(READ_ONLY.equals(kv.get()._1().trim()) && "true".equalsIgnoreCase(kv.get()._2().get().trim()))) {
                refuse("SET " + kv.get()._1().trim());
            }
            return;
        }
        if (node instanceof DropTableCommand && ((DropTableCommand) node).isView()) {
            return;                                         // DROP VIEW: views are the user's own
        }
        if (node instanceof InsertIntoStatement
                || (node instanceof Command && !ALLOWED.contains(node.getClass().getSimpleName()))) {
            refuse(node.getClass().getSimpleName());
        }
        boolean reflects = node.expressions().exists(
            e -> ((Expression) e).exists(x -> x instanceof CallMethodViaReflection));
        if (reflects) {
            refuse("reflect/java_method (a Java call)");
        }
    }

    private static void refuse(String what) {
        throw new UnsupportedOperationException("read-only SQL: " + what + " is not allowed (queries, views, SHOW, "
            + "DESCRIBE, EXPLAIN and history are; `blockheat sql --allow-writes`, `blockheat serve --allow-writes` "
            + "and `blockheat serve-sql --allow-writes` allow writes)");
    }
}
