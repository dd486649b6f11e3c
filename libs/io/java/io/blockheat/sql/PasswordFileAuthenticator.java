package io.blockheat.sql;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.List;

import javax.security.sasl.AuthenticationException;

import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2's CUSTOM authentication for the Thrift JDBC/ODBC endpoint (hive.server2.authentication=CUSTOM): a
 * client's password must equal the first line of the file BLOCKHEAT_SQL_PASSWORD_FILE names (the server's
 * environment; blockheat makes it readable by its owner only). Any user name; the comparison takes the same time
 * whatever the password.
 */
public final class PasswordFileAuthenticator implements PasswdAuthenticationProvider {
    public static final String FILE_ENV = "BLOCKHEAT_SQL_PASSWORD_FILE";

    @Override
    public void Authenticate(String user, String password) throws AuthenticationException {
        String file = System.getenv(FILE_ENV);
        if (file == null || file.isEmpty()) {
            throw new AuthenticationException("the server has no password file (" + FILE_ENV + ")");
        }
        byte[] expected;
        try {
            List<String> lines = Files.readAllLines(Path.of(file), StandardCharsets.UTF_8);
            expected = (lines.isEmpty() ? "" : lines.get(0).strip()).getBytes(StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new AuthenticationException("the server cannot read its password file", e);
        }
        byte[] given = (password == null ? "" : password).getBytes(StandardCharsets.UTF_8);
        if (expected.length == 0 || !MessageDigest.isEqual(expected, given)) {
            throw new AuthenticationException("wrong user name or password");
        }
    }
}
