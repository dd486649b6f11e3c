package io.blockheat.sql;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.Function0;
import scala.collection.immutable.Seq;

/**
 * The parser of a guarded application (ReadOnlyGuard): the session's parser (Delta's over Spark's) run with variable
 * substitution off, whatever the client set, and, for a statement or a table's name, once the warehouse's pending
 * commits are finished (CommitBarrier). `${env:...}`, `${system:...}` and `${spark.*}` stay literal text, so no
 * client reads the server's environment, system properties or settings through SQL, even in a parse error's
 * message (substitution runs before parsing, so a check of the parsed plan comes too late).
 */
public final class GuardParser implements ParserInterface {
    static final String SUBSTITUTE = "spark.sql.variable.substitute";

    private final SparkSession session;
    private final ParserInterface delegate;

    public GuardParser(SparkSession session, ParserInterface delegate) {
        this.session = session;
        this.delegate = delegate;
    }

    /** A call of the delegate. */
    @FunctionalInterface
    private interface Parse<T> {
        T run() throws ParseException;
    }

    /** `parse` run with a copy of the current settings that has substitution off; its ParseException as is. */
    private static <T> T literally(Parse<T> parse) throws ParseException {
        SQLConf conf = SQLConf.get().clone();
        conf.setConfString(SUBSTITUTE, "false");
        Function0<T> call = () -> {
            try {
                return parse.run();
            } catch (ParseException e) {
                throw GuardParser.<RuntimeException>rethrow(e);
            }
        };
        return SQLConf.withExistingConf(conf, call);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E rethrow(Throwable e) throws E {
        throw (E) e;
    }

    @Override
    public LogicalPlan parsePlan(String sqlText) throws ParseException {
        CommitBarrier.await(session);
        return literally(() -> delegate.parsePlan(sqlText));
    }

    @Override
    public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext parameters) throws ParseException {
        CommitBarrier.await(session);
        return literally(() -> delegate.parsePlanWithParameters(sqlText, parameters));
    }

    @Override
    public Expression parseExpression(String sqlText) throws ParseException {
        return literally(() -> delegate.parseExpression(sqlText));
    }

    @Override
    public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
        CommitBarrier.await(session);
        return literally(() -> delegate.parseTableIdentifier(sqlText));
    }

    @Override
    public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
        return literally(() -> delegate.parseFunctionIdentifier(sqlText));
    }

    @Override
    public Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
        CommitBarrier.await(session);
        return literally(() -> delegate.parseMultipartIdentifier(sqlText));
    }

    @Override
    public LogicalPlan parseQuery(String sqlText) throws ParseException {
        CommitBarrier.await(session);
        return literally(() -> delegate.parseQuery(sqlText));
    }

    @Override
    public StructType parseRoutineParam(String sqlText) throws ParseException {
        return literally(() -> delegate.parseRoutineParam(sqlText));
    }

    @Override
    public StructType parseTableSchema(String sqlText) throws ParseException {
        return literally(() -> delegate.parseTableSchema(sqlText));
    }

    @Override
    public DataType parseDataType(String sqlText) throws ParseException {
        return literally(() -> delegate.parseDataType(sqlText));
    }
}
