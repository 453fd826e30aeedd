// Starts DynamoDB Local bound to 127.0.0.1 only. DynamoDB Local has no option for the address
// it listens on (its Jetty connector takes every interface); this launcher builds the server
// exactly as DynamoDB Local's own main does, sets its connector's host to the loopback address,
// then starts it. Run as a single-file source program (java LoopbackDynamoDbLocal.java ARGS,
// Java 11 or later) with DynamoDBLocal.jar and DynamoDBLocal_lib/* on the class path; ARGS are
// DynamoDB Local's own (-inMemory -sharedDb -port N ...).
import com.amazonaws.services.dynamodbv2.local.main.ServerRunner;
import com.amazonaws.services.dynamodbv2.local.server.DynamoDBProxyServer;
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

public class LoopbackDynamoDbLocal {
  public static void main(String[] args) throws Exception {
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
    int bound = 0;
    for (Field field : DynamoDBProxyServer.class.getDeclaredFields()) {
      if (!Server.class.isAssignableFrom(field.getType())) continue;
      field.setAccessible(true);
      Server server = (Server) field.get(proxy);
      for (Connector connector : server.getConnectors()) {
        if (connector instanceof ServerConnector) {
          ((ServerConnector) connector).setHost("127.0.0.1");
          bound++;
        }
      }
    }
    if (bound == 0) {
      System.err.println("LoopbackDynamoDbLocal: found no connector to bind to 127.0.0.1; not starting");
      System.exit(2);
    }
    proxy.start();
    proxy.join();
  }
}
