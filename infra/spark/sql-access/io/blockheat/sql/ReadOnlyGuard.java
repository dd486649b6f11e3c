package io.blockheat.sql;

import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
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
 * A Spark SQL extension (spark.sql.extensions) that makes a session read-only unless its setting
 * spark.blockheat.allowWrites is true: queries and the commands that only read or concern the user's own views and
 * session (ALLOWED: views, SHOW, DESCRIBE, EXPLAIN, table history, SET, USE, CACHE) pass; every other command
 * (INSERT, DELETE, UPDATE, MERGE, CREATE/DROP/ALTER/TRUNCATE TABLE, Delta's RESTORE, OPTIMIZE, VACUUM, ADD JAR,
 * CREATE FUNCTION...), a script (TRANSFORM) and a SET of the protected settings from SQL are refused at analysis,
 * before anything runs. A Spark Connect client sets the allowance with a configuration request, which is no SQL.
 */
public final class ReadOnlyGuard implements Function1<SparkSessionExtensions, BoxedUnit> {
    public static final String ALLOW_WRITES = "spark.blockheat.allowWrites";
    /** Settings SQL may not change in a read-only session (file queries stay off: spark.sql.runSQLOnFiles). */
    static final Set<String> PROTECTED = Set.of(ALLOW_WRITES, "spark.sql.runSQLOnFiles");
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

    static void check(SparkSession session, LogicalPlan plan) {
        if ("true".equalsIgnoreCase(session.conf().get(ALLOW_WRITES, "false"))) {
            return;
        }
        plan.foreachWithSubqueries(node -> {
            inspect(node);
            return BoxedUnit.UNIT;
        });
    }

    static void inspect(LogicalPlan node) {
        String name = node.getClass().getSimpleName();
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
        if (node instanceof ScriptTransformation) {
            refuse("TRANSFORM (a script)");
        }
        if (node instanceof InsertIntoStatement || (node instanceof Command && !ALLOWED.contains(name))) {
            refuse(name);
        }
    }

    private static void refuse(String what) {
        throw new UnsupportedOperationException("read-only SQL: " + what + " is not allowed (queries, views, SHOW, "
            + "DESCRIBE, EXPLAIN and history are; `blockheat sql --allow-writes`, `blockheat serve --allow-writes` "
            + "allow writes)");
    }
}
