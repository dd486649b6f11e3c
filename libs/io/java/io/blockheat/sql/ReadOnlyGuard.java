package io.blockheat.sql;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Set;

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
 * A Spark SQL extension (spark.sql.extensions) that makes a session read-only unless it may write: queries and the
 * commands that only read or concern the user's own views and session (ALLOWED: views, SHOW, DESCRIBE, EXPLAIN,
 * table history, SET, USE, CACHE) pass; every other command (INSERT, DELETE, UPDATE, MERGE, CREATE/DROP/ALTER/
 * TRUNCATE TABLE, Delta's RESTORE, OPTIMIZE, VACUUM, ADD JAR, CREATE FUNCTION...), Java calls by reflection
 * (reflect, java_method), a SET of the PROTECTED settings from SQL, and any statement while file queries
 * (spark.sql.runSQLOnFiles) are on, are refused at analysis, before anything runs. A script (TRANSFORM) is refused
 * in every session.
 *
 * <p>A session writes when its ALLOW_WRITES is true and either the application's own ALLOW_WRITES (its Spark
 * configuration, which no client changes) is true or the session's WRITE_KEY equals the application's Spark
 * Connect token (TOKEN_ENV in its environment). A JDBC client can set session settings when it connects (the URL's
 * hive configuration), so the session's own ALLOW_WRITES alone is never enough; a Spark Connect client holds the
 * token already, and sets both settings with a configuration request.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {
    public static final String ALLOW_WRITES = "spark.blockheat.allowWrites";
    public static final String WRITE_KEY = "spark.blockheat.writeKey";
    public static final String TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN";
    static final String FILE_QUERIES = "spark.sql.runSQLOnFiles";
    /** Settings SQL may not change in a read-only session. */
    static final Set<String> PROTECTED = Set.of(ALLOW_WRITES, WRITE_KEY, FILE_QUERIES);
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
        return BoxedUnit.UNIT;
    }

    /** Whether `session` may write (see the class comment). */
    static boolean writable(SparkSession session) {
        String application = session.sparkContext().getConf().get(ALLOW_WRITES, "false");
        if (!"true".equalsIgnoreCase(session.conf().get(ALLOW_WRITES, application))) {
            return false;
        }
        if ("true".equalsIgnoreCase(application)) {
            return true;
        }
        String token = System.getenv(TOKEN_ENV);
        String key = session.conf().get(WRITE_KEY, "");
        return token != null && !token.isEmpty() && MessageDigest.isEqual(
            token.getBytes(StandardCharsets.UTF_8), key.getBytes(StandardCharsets.UTF_8));
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
            if (kv.isDefined() && kv.get()._2().isDefined() && PROTECTED.contains(kv.get()._1().trim())) {
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
